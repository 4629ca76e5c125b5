-- Combined applied: which of the versions @versions the combined sequence's version table
-- records as applied, in order. Locks nothing.
SELECT DISTINCT version_id FROM public.goose_db_version
	WHERE is_applied AND version_id = ANY(@versions) ORDER BY version_id
