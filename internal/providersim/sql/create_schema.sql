-- Create schema: the simulator's schema (Schema), if it is not there yet: goose creates its
-- version table in it before the first migration runs. No arguments. Locks: the catalog,
-- briefly.
CREATE SCHEMA IF NOT EXISTS providersim
