-- Get user: user @id (no row: unknown). Locks nothing.
SELECT id, name, phone, locale, created_at FROM users WHERE id = @id
