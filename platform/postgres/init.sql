-- memdesk database bootstrap. The postgres image runs this once, on an empty
-- data volume, as the superuser (POSTGRES_USER) via psql.
--
-- Why a separate app role: memdesk isolates tenants with row-level security
-- (FORCE ROW LEVEL SECURITY on every tenant-owned table). Superusers and roles
-- with BYPASSRLS ignore every policy, so an app connected as `postgres` would
-- silently lose that second wall. The app role owns its tables (it runs the
-- migrations) and FORCE makes the policies bind the owner too.
--
-- Why the extension is created here: a non-superuser cannot CREATE EXTENSION
-- vector. It goes into template1 first, so the memdesk database (and any test
-- database created later) inherits it. Likewise full-text matching is marked
-- LEAKPROOF (superuser only): under row-level security PostgreSQL uses an index
-- only for leakproof operators, and recall's search of a long history needs the
-- full-text index (docs/operations.md, section 3).

\set ON_ERROR_STOP on

-- The password comes from the container environment, never from this file.
\getenv app_password MEMDESK_DB_PASSWORD
\if :{?app_password}
\else
    DO $$ BEGIN RAISE EXCEPTION 'MEMDESK_DB_PASSWORD is not set for the db container'; END $$;
\endif

CREATE ROLE memdesk LOGIN NOSUPERUSER NOBYPASSRLS NOCREATEROLE NOCREATEDB NOREPLICATION
    PASSWORD :'app_password';

\connect template1
CREATE EXTENSION IF NOT EXISTS vector;
ALTER FUNCTION pg_catalog.ts_match_vq(tsvector, tsquery) LEAKPROOF;

\connect postgres
CREATE DATABASE memdesk OWNER memdesk TEMPLATE template1;

\connect memdesk
CREATE EXTENSION IF NOT EXISTS vector;
ALTER FUNCTION pg_catalog.ts_match_vq(tsvector, tsquery) LEAKPROOF;
-- PostgreSQL 15+ already keeps PUBLIC from creating objects in schema public;
-- the database owner (memdesk) still can, which the migrations need.
REVOKE CREATE ON SCHEMA public FROM PUBLIC;
