-- test/sqlsmith/logdb.sql: where SQLsmith's --log-to writes the errors it
-- sees, in a database of its own beside the one under test.
--
-- test/sqlsmith/run loads it as a superuser into an empty database:
--
--   psql -v ON_ERROR_STOP=1 -d hxsmith_log -f test/sqlsmith/logdb.sql
--
-- The three tables are the ones SQLsmith 1.4 writes (instance, error,
-- stat), with the columns it inserts into.  A run sends hundreds of errors
-- a second, most of them with a few kilobytes of query, so the error table
-- keeps the whole error, query included, only for the errors worth
-- reading: internal errors (class XX), system errors (class 58), and the
-- errors of queries that call one of hxstate's functions whose SQLSTATE
-- is not of the ordinary classes listed in count_error().  Every error is
-- counted in error_class by SQLSTATE and message (its first line): the
-- summary SQLsmith prints, with the SQLSTATE beside each message.

\set ON_ERROR_STOP 1
SET client_min_messages = warning;

CREATE TABLE instance (
	id       bigserial PRIMARY KEY,
	rev      text,
	target   text,
	hostname text,
	version  text,
	seed     text,
	t        timestamptz DEFAULT now()
);

CREATE TABLE error (
	id       bigint REFERENCES instance (id),
	msg      text,
	query    text,
	sqlstate text,
	t        timestamptz DEFAULT now(),
	errid    bigserial PRIMARY KEY
);

CREATE TABLE stat (
	id        bigint REFERENCES instance (id),
	generated bigint,
	level     float,
	nodes     float,
	retries   float,
	updated   timestamptz,
	impedance jsonb
);

CREATE TABLE error_class (
	sqlstate text NOT NULL,
	msg      text NOT NULL,
	n        bigint NOT NULL,
	hx       bigint NOT NULL,     -- of them, in a query that calls an hx_ function
	PRIMARY KEY (sqlstate, msg)
);

CREATE FUNCTION count_error() RETURNS trigger
LANGUAGE plpgsql AS $$
DECLARE
	first text := substr(split_part(NEW.msg, E'\n', 1), 1, 200);
	hx boolean := NEW.query ~ 'hx_[a-z_]+\(';
BEGIN
	INSERT INTO error_class VALUES (coalesce(NEW.sqlstate, '?????'), first, 1, hx::int)
	ON CONFLICT (sqlstate, msg) DO UPDATE
		SET n = error_class.n + 1, hx = error_class.hx + excluded.hx;
	-- The rule: keep internal and system errors whole, and hxstate's
	-- errors outside the classes that random SQL raises by the thousand
	-- (syntax and access 42, data 22, integrity 23, cancellation 57,
	-- resources 53 and 54, program limits, hxstate's own XH class, the
	-- invalid-state and -parameter classes 0A, 25, 2B, 39, 3F, 55, 2F)
	IF NEW.sqlstate ~ '^(XX|58)'
	   OR (hx AND NEW.sqlstate !~ '^(42|22|23|57|53|54|XH|0A|25|2B|39|3F|55|2F|21|0L|0P|28|2D|40|44)') THEN
		RETURN NEW;
	END IF;
	RETURN NULL;
END
$$;

CREATE TRIGGER count_error BEFORE INSERT ON error
	FOR EACH ROW EXECUTE FUNCTION count_error();
