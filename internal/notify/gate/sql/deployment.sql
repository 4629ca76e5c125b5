-- Deployment: the id the notifier's tables were created with, part of every provider key.
SELECT id::text FROM notify.deployment
