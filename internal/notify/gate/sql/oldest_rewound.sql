-- OldestRewound: how long ago, in seconds, the oldest row was set aside from a rewound
-- history (NULL: none).
SELECT EXTRACT(EPOCH FROM now() - min(at))::float8 FROM notify.rewound
