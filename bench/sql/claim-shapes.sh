#!/usr/bin/env bash
# Postgres-side cost of claim designs, without Node in the way: pgbench replays the exact statement shapes the
# middleware sends (several statements per round trip joined with `\;`, simple protocol, 16 clients), each
# shape a 3-round-trip transaction around the light handler's insert, interleaved over rounds.
#   bench/sql/claim-shapes.sh [DATABASE_URL] [seconds per cell] [rounds]
# Prints tps per round and the median ratio to the bare shape (the cheapest claim-run-complete transaction), and for
# the payment shapes to the payment handler alone. SHAPES='bare now single' runs a subset.
set -euo pipefail
URL="${1:-${DATABASE_URL:-postgres://postgres@127.0.0.1:5432/postgres}}"
SECONDS_PER_CELL="${2:-6}"
ROUNDS="${3:-3}"
DB="bench_claim_shapes_$$"
ADMIN="${URL%/*}/postgres"
DIR="$(mktemp -d)"
trap 'psql -q "$ADMIN" -c "DROP DATABASE IF EXISTS $DB" >/dev/null 2>&1 || true; rm -rf "$DIR"' EXIT
[[ -n "${KEEP_SCRIPTS:-}" ]] && trap 'psql -q "$ADMIN" -c "DROP DATABASE IF EXISTS $DB" >/dev/null 2>&1 || true; cp -r "$DIR" "$KEEP_SCRIPTS"' EXIT
psql -q "$ADMIN" -c "CREATE DATABASE $DB"
TARGET="${URL%/*}/$DB"
psql -q "$TARGET" <<'SQL'
CREATE TABLE idempotency_keys (
  scope text NOT NULL, key text NOT NULL, fingerprint text NOT NULL, path text NOT NULL,
  status text NOT NULL CHECK (status IN ('in_progress', 'done')), token text, locked_until timestamptz,
  response text, created_at timestamptz NOT NULL DEFAULT clock_timestamp(), expires_at timestamptz NOT NULL,
  PRIMARY KEY (scope, key));
CREATE INDEX ON idempotency_keys (expires_at);
-- The same table with a cheaper index for expiry (BRIN: one summary per block range, not one entry per row), and
-- with none at all (the key row's floor without it): only the expiry purge reads that index.
CREATE TABLE idempotency_keys_brin (LIKE idempotency_keys INCLUDING ALL EXCLUDING INDEXES, PRIMARY KEY (scope, key));
CREATE INDEX ON idempotency_keys_brin USING brin (expires_at);
CREATE TABLE idempotency_keys_noexp (LIKE idempotency_keys INCLUDING ALL EXCLUDING INDEXES, PRIMARY KEY (scope, key));
CREATE TABLE classic_keys (key text PRIMARY KEY, fingerprint text NOT NULL, status text NOT NULL, response text);
CREATE TABLE payments (id serial PRIMARY KEY, account_id int NOT NULL, amount int NOT NULL, ref text);
CREATE TABLE accounts (id int PRIMARY KEY, balance bigint NOT NULL);
INSERT INTO accounts SELECT g, 1000000000 FROM generate_series(1, 1000) g;
-- The same claim as a PL/pgSQL function: its insert is planned once per connection, not per call.
CREATE FUNCTION claim(p_scope text, p_key text, p_fingerprint text, p_path text, p_ttl_ms int, p_wait_ms int)
RETURNS float8 LANGUAGE plpgsql AS $$
DECLARE
  saved text := current_setting('lock_timeout');
  expires timestamptz;
BEGIN
  PERFORM set_config('trpc_idempotency.claim_snapshot', pg_current_snapshot()::text, true);
  PERFORM set_config('lock_timeout', p_wait_ms || 'ms', true);
  INSERT INTO idempotency_keys (scope, key, fingerprint, path, status, created_at, expires_at)
  VALUES (p_scope, p_key, p_fingerprint, p_path, 'in_progress', clock_timestamp(),
    clock_timestamp() + p_ttl_ms * interval '1 millisecond')
  ON CONFLICT (scope, key) DO NOTHING RETURNING expires_at INTO expires;
  PERFORM set_config('lock_timeout', saved, true);
  RETURN extract(epoch from expires) * 1000;
END $$;
SQL

T=idempotency_keys
K="E'bench', E'k:k'"
FP="E'6e4799211cceeab50bca536ee432d44de186163f717ccbf8370ef581a6f97868'"
TTL="clock_timestamp() + 86400000 * interval '1 millisecond'"
FREE="(x.expires_at <= clock_timestamp() AND NOT (x.status = 'in_progress' AND x.locked_until > clock_timestamp()))"
BOUND="set_config('lock_timeout', CASE WHEN set_config('trpc_idempotency.saved_lock_timeout', current_setting('lock_timeout'), true) IS NULL OR set_config('trpc_idempotency.claim_snapshot', pg_current_snapshot()::text, true) IS NULL THEN NULL ELSE '5000ms' END, true) IS NOT NULL"
RESTORE="set_config('lock_timeout', current_setting('trpc_idempotency.saved_lock_timeout'), true)"
EXPIRES="(extract(epoch from k.expires_at) * 1000)::float8 AS expires_ms"
PAY="INSERT INTO payments (account_id, amount, ref) VALUES (:a, 1, NULL) RETURNING id"
COMPLETE="UPDATE $T SET status = 'done', response = E'{\"v\":1,\"ok\":true,\"data\":{\"id\":502}}', locked_until = NULL WHERE scope = E'bench' AND key = E'k:k'"
READ="SELECT status, fingerprint, path, response, token, xmin::text AS xmin, (extract(epoch from expires_at) * 1000)::float8 AS expires_ms FROM $T WHERE scope = E'bench' AND key = E'k:k'"
# The claim this project sent before: one CTE that read the row, inserted or took over, and saved/restored lock_timeout.
CTE="WITH seen AS (SELECT $FREE AS free FROM $T AS x WHERE x.scope = E'bench' AND x.key = E'k:k'), claimed AS (INSERT INTO $T AS k (scope, key, fingerprint, path, status, created_at, expires_at) SELECT $K, $FP, E'light', 'in_progress', clock_timestamp(), $TTL WHERE NOT EXISTS (SELECT 1 FROM seen WHERE NOT seen.free) AND $BOUND ON CONFLICT (scope, key) DO UPDATE SET fingerprint = excluded.fingerprint, path = excluded.path, status = 'in_progress', token = NULL, locked_until = NULL, response = NULL, created_at = excluded.created_at, expires_at = excluded.expires_at WHERE (k.expires_at <= clock_timestamp() AND NOT (k.status = 'in_progress' AND k.locked_until > clock_timestamp())) RETURNING $EXPIRES, $RESTORE AS restored) SELECT claimed.expires_ms, (SELECT count(*) FROM seen)::int AS seen_rows FROM (SELECT 1) AS one LEFT JOIN claimed ON true"
# The claim it sends now: a plain insert whose one-time filter bounds the wait.
CLAIM="INSERT INTO $T AS k (scope, key, fingerprint, path, status, created_at, expires_at) SELECT $K, $FP, E'light', 'in_progress', clock_timestamp(), $TTL WHERE $BOUND ON CONFLICT (scope, key) DO NOTHING RETURNING $EXPIRES, $RESTORE AS restored"
BARE="INSERT INTO $T AS k (scope, key, fingerprint, path, status, created_at, expires_at) VALUES ($K, $FP, E'light', 'in_progress', clock_timestamp(), $TTL) ON CONFLICT (scope, key) DO NOTHING RETURNING $EXPIRES"

# THINK_US=500 puts that many µs of client "think time" between a transaction's round trips, as an app server
# spends between a statement's answer and its next one (tRPC, Kysely, the handler): a transaction then stays open
# that long, which an autocommit design does not pay.
THINK_US="${THINK_US:-0}"
shape() { # name, then one argument per round trip (statements already joined with \;)
  local name="$1"; shift
  local first=1
  { echo '\set k random(1, 9000000000000000)'; echo '\set a random(1, 1000)'
    for rt in "$@"; do
      [[ $first == 0 && $THINK_US != 0 ]] && echo "\\sleep $THINK_US us"
      first=0
      echo "$rt;"
    done; } > "$DIR/$name.sql"
}

# Candidate designs for issue 15 (the key row written once, fewer statements, prepared plans).
LOCKKEY="hashtextextended(E'idempotency_keys' || chr(31) || E'bench' || chr(31) || E'k:k', 0)"
# Single write: ownership is the key's transaction-scoped advisory lock (bounded like the claim), the row is read
# after it (a new statement: a fresh snapshot sees what a holder committed) and inserted once, done, at the end.
SLOCK="SELECT pg_advisory_xact_lock($LOCKKEY), $RESTORE AS restored FROM (SELECT 1) AS one WHERE $BOUND"
SREAD="SELECT status, fingerprint, path, response FROM $T WHERE scope = E'bench' AND key = E'k:k'"
SINSERT="INSERT INTO $T (scope, key, fingerprint, path, status, response, created_at, expires_at) VALUES ($K, $FP, E'light', 'done', E'{\"v\":1,\"ok\":true,\"data\":{\"id\":502}}', clock_timestamp(), $TTL) ON CONFLICT (scope, key) DO NOTHING RETURNING 1"
# The payment handler: lock an account, insert the payment, debit it (3 round trips inside the transaction).
PLOCK="SELECT balance FROM accounts WHERE id = :a FOR UPDATE"
PDEBIT="UPDATE accounts SET balance = balance - 1 WHERE id = :a RETURNING balance"

shape plain "$PAY"
shape bare "BEGIN\\; $BARE" "$PAY" "$COMPLETE\\; COMMIT"
shape before "BEGIN\\; $CTE\\; $READ\\; SAVEPOINT s" "$PAY" "$COMPLETE\\; COMMIT"
shape now "BEGIN\\; $CLAIM\\; SAVEPOINT s" "$PAY" "RELEASE SAVEPOINT s\\; $COMPLETE\\; COMMIT"
shape now+read "BEGIN\\; $CLAIM\\; $READ\\; SAVEPOINT s" "$PAY" "RELEASE SAVEPOINT s\\; $COMPLETE\\; COMMIT"
shape function "BEGIN\\; SELECT claim($K, $FP, E'light', 86400000, 5000) AS expires_ms\\; SAVEPOINT s" "$PAY" "RELEASE SAVEPOINT s\\; $COMPLETE\\; COMMIT"
shape now-nosp "BEGIN\\; $CLAIM" "$PAY" "$COMPLETE\\; COMMIT"
shape now-nobound "BEGIN\\; $BARE\\; SAVEPOINT s" "$PAY" "RELEASE SAVEPOINT s\\; $COMPLETE\\; COMMIT"
shape single "BEGIN\\; $SLOCK\\; $SREAD\\; SAVEPOINT s" "$PAY" "RELEASE SAVEPOINT s\\; $SINSERT\\; COMMIT"
# Each statement its own round trip, as node-postgres sends named prepared statements (it does not pipeline):
# split-simple plans every statement each time, split-prepared (run with -M prepared) plans once per connection.
# A prepared statement takes the key as a parameter (pgbench would not substitute it inside a quoted literal), and
# its text must hold no other colon (the stored JSON's `"v":1` would read as a variable).
shape split-simple "BEGIN" "${CLAIM//E\'k:k\'/(E\'k\' || :k::text)}" "SAVEPOINT s" "${PAY//:a/:a::int}" "RELEASE SAVEPOINT s" \
  "$(sed "s/:/=/g; s/E'k=k'/(E'k' || :k::text)/" <<<"$COMPLETE")" "COMMIT"
cp "$DIR/split-simple.sql" "$DIR/split-prepared.sql"
shape pay-plain "BEGIN" "$PLOCK" "$PAY" "$PDEBIT" "COMMIT"
shape pay-now "BEGIN\\; $CLAIM\\; SAVEPOINT s" "$PLOCK" "$PAY" "$PDEBIT" "RELEASE SAVEPOINT s\\; $COMPLETE\\; COMMIT"
shape pay-function "BEGIN\\; SELECT claim($K, $FP, E'light', 86400000, 5000) AS expires_ms\\; SAVEPOINT s" "$PLOCK" "$PAY" "$PDEBIT" "RELEASE SAVEPOINT s\\; $COMPLETE\\; COMMIT"
shape pay-nosp "BEGIN\\; $CLAIM" "$PLOCK" "$PAY" "$PDEBIT" "$COMPLETE\\; COMMIT"
shape pay-bare "BEGIN\\; $BARE" "$PLOCK" "$PAY" "$PDEBIT" "$COMPLETE\\; COMMIT"
shape pay-single "BEGIN\\; $SLOCK\\; $SREAD\\; SAVEPOINT s" "$PLOCK" "$PAY" "$PDEBIT" "RELEASE SAVEPOINT s\\; $SINSERT\\; COMMIT"
# The index for expiry as BRIN, and absent: the same texts on the other two tables.
for v in brin noexp; do
  for base in now pay-now; do sed "s/idempotency_keys /idempotency_keys_$v /g" "$DIR/$base.sql" > "$DIR/$base-$v.sql"; done
done
# Today's claim and completion as SQL-level prepared statements, prepared once per connection (pgbench keeps a
# variable per client: -D prepared=0 and \set), executed inside the same one-text round trips.
PCLAIM="PREPARE claim_p(text, text, text, text) AS ${CLAIM/"$K, $FP, E'light'"/\$1, \$2, \$3, \$4}"
PCOMPLETE="PREPARE complete_p(text, text, text) AS UPDATE $T SET status = 'done', response = \$3, locked_until = NULL WHERE scope = \$1 AND key = \$2"
RESPONSE="E'{\"v\":1,\"ok\":true,\"data\":{\"id\":502}}'"
# The guarded completion, prepared: it updates only this transaction's in_progress claim and fails otherwise.
PGUARDED="PREPARE complete_g(text, text, text) AS WITH done AS (UPDATE $T SET status = 'done', response = \$3, locked_until = NULL WHERE scope = \$1 AND key = \$2 AND status = 'in_progress' AND token IS NULL RETURNING 1) SELECT 1 / (SELECT count(*)::int FROM done) AS completed"
# The completion the middleware prepares now (issue 29): the same update without the guard; the mode reads its row
# count, which arrives with the COMMIT's answer, and acts only when it is 0.
PUNGUARDED="PREPARE complete_u(text, text, text) AS UPDATE $T SET status = 'done', response = \$3, locked_until = NULL WHERE scope = \$1 AND key = \$2 AND status = 'in_progress' AND token IS NULL"
prepare_once() { printf '\\if :prepared = 0\n%s;\n%s;\n%s;\n%s;\n\\set prepared 1\n\\endif\n' "$PCLAIM" "$PCOMPLETE" "$PGUARDED" "$PUNGUARDED"; }
with_prepare() { { prepare_once; cat "$DIR/$1.sql"; } > "$DIR/$1.tmp" && mv "$DIR/$1.tmp" "$DIR/$1.sql"; }
XCLAIM="EXECUTE claim_p($K, $FP, E'light')"
XCOMPLETE="EXECUTE complete_p(E'bench', E'k:k', $RESPONSE)"
shape now-exec "BEGIN\\; $XCLAIM\\; SAVEPOINT s" "$PAY" "RELEASE SAVEPOINT s\\; $XCOMPLETE\\; COMMIT"
shape pay-now-exec "BEGIN\\; $XCLAIM\\; SAVEPOINT s" "$PLOCK" "$PAY" "$PDEBIT" "RELEASE SAVEPOINT s\\; $XCOMPLETE\\; COMMIT"
shape now-exec1 "BEGIN\\; $XCLAIM\\; SAVEPOINT s" "$PAY" "RELEASE SAVEPOINT s\\; $COMPLETE\\; COMMIT"
shape pay-now-exec1 "BEGIN\\; $XCLAIM\\; SAVEPOINT s" "$PLOCK" "$PAY" "$PDEBIT" "RELEASE SAVEPOINT s\\; $COMPLETE\\; COMMIT"
# What the middleware sends now: the prepared claim, plus the completion's EXECUTE on no row in the claim's round
# trip (a connection that lost the completion fails before the handler runs).
XPROBE="EXECUTE complete_p(E'', E'', E'')"
shape now-exec-probe "BEGIN\\; $XCLAIM\\; $XPROBE\\; SAVEPOINT s" "$PAY" "RELEASE SAVEPOINT s\\; $XCOMPLETE\\; COMMIT"
shape pay-now-exec-probe "BEGIN\\; $XCLAIM\\; $XPROBE\\; SAVEPOINT s" "$PLOCK" "$PAY" "$PDEBIT" "RELEASE SAVEPOINT s\\; $XCOMPLETE\\; COMMIT"
with_prepare now-exec-probe
with_prepare pay-now-exec-probe
# What the middleware sends now: the prepared claim, and the completion that fails unless it updated the claimed row.
GUARDED="WITH done AS (${COMPLETE} RETURNING 1) SELECT 1 / (SELECT count(*)::int FROM done) AS completed"
shape now-exec1-guard "BEGIN\\; $XCLAIM\\; SAVEPOINT s" "$PAY" "RELEASE SAVEPOINT s\\; $GUARDED\\; COMMIT"
shape pay-now-exec1-guard "BEGIN\\; $XCLAIM\\; SAVEPOINT s" "$PLOCK" "$PAY" "$PDEBIT" "RELEASE SAVEPOINT s\\; $GUARDED\\; COMMIT"
with_prepare now-exec1-guard
with_prepare pay-now-exec1-guard
with_prepare now-exec1
# A check after the plain completion instead of the CTE: a second, one-row read of the key that fails unless this
# transaction wrote the row's current version (the general path's claimedCheck, moved after the completion).
CHECKED="SELECT 1 / count(*)::int AS completed FROM $T WHERE scope = E'bench' AND key = E'k:k' AND xmin::text::bigint = txid_current() % 4294967296"
shape now-exec1-check "BEGIN\\; $XCLAIM\\; SAVEPOINT s" "$PAY" "RELEASE SAVEPOINT s\\; $COMPLETE\\; $CHECKED\\; COMMIT"
shape pay-now-exec1-check "BEGIN\\; $XCLAIM\\; SAVEPOINT s" "$PLOCK" "$PAY" "$PDEBIT" "RELEASE SAVEPOINT s\\; $COMPLETE\\; $CHECKED\\; COMMIT"
with_prepare now-exec1-check
with_prepare pay-now-exec1-check
XGUARDED="EXECUTE complete_g(E'bench', E'k:k', $RESPONSE)"
shape now-exec-guard "BEGIN\\; $XCLAIM\\; SAVEPOINT s" "$PAY" "RELEASE SAVEPOINT s\\; $XGUARDED\\; COMMIT"
shape pay-now-exec-guard "BEGIN\\; $XCLAIM\\; SAVEPOINT s" "$PLOCK" "$PAY" "$PDEBIT" "RELEASE SAVEPOINT s\\; $XGUARDED\\; COMMIT"
with_prepare now-exec-guard
with_prepare pay-now-exec-guard
XUNGUARDED="EXECUTE complete_u(E'bench', E'k:k', $RESPONSE)"
shape now-exec-plain "BEGIN\\; $XCLAIM\\; SAVEPOINT s" "$PAY" "RELEASE SAVEPOINT s\\; $XUNGUARDED\\; COMMIT"
shape pay-now-exec-plain "BEGIN\\; $XCLAIM\\; SAVEPOINT s" "$PLOCK" "$PAY" "$PDEBIT" "RELEASE SAVEPOINT s\\; $XUNGUARDED\\; COMMIT"
with_prepare now-exec-plain
with_prepare pay-now-exec-plain
# The same guard without a CTE: the update's RETURNING marks a transaction-local setting for the row it updated, and
# a table-less SELECT in the same text divides by zero unless it was marked.
MARKED="${COMPLETE} AND status = 'in_progress' AND token IS NULL RETURNING set_config('trpc_idempotency.completed', 'y', true)"
MARKCHECK="SELECT 1 / coalesce((current_setting('trpc_idempotency.completed', true) = 'y')::int, 0) AS completed"
shape now-exec1-mark "BEGIN\\; $XCLAIM\\; SAVEPOINT s" "$PAY" "RELEASE SAVEPOINT s\\; $MARKED\\; $MARKCHECK\\; COMMIT"
shape pay-now-exec1-mark "BEGIN\\; $XCLAIM\\; SAVEPOINT s" "$PLOCK" "$PAY" "$PDEBIT" "RELEASE SAVEPOINT s\\; $MARKED\\; $MARKCHECK\\; COMMIT"
with_prepare now-exec1-mark
with_prepare pay-now-exec1-mark
with_prepare pay-now-exec1
# The PL/pgSQL claim with the completion prepared (issue 29: the completion may be prepared now): against now-exec.
XFCLAIM="SELECT claim($K, $FP, E'light', 86400000, 5000) AS expires_ms"
shape function-exec "BEGIN\\; $XFCLAIM\\; SAVEPOINT s" "$PAY" "RELEASE SAVEPOINT s\\; $XCOMPLETE\\; COMMIT"
shape pay-function-exec "BEGIN\\; $XFCLAIM\\; SAVEPOINT s" "$PLOCK" "$PAY" "$PDEBIT" "RELEASE SAVEPOINT s\\; $XCOMPLETE\\; COMMIT"
with_prepare function-exec
with_prepare pay-function-exec
with_prepare now-exec
with_prepare pay-now-exec
shape classic "INSERT INTO classic_keys (key, fingerprint, status) VALUES (E'k:k', $FP, 'in_progress') ON CONFLICT (key) DO NOTHING RETURNING key" "$PAY" "UPDATE classic_keys SET status = 'done', response = E'{}' WHERE key = E'k:k'"

SHAPES=(${SHAPES:-plain bare before now now+read function classic now-nosp now-nobound single split-simple split-prepared pay-plain pay-now pay-nosp pay-bare pay-single})
mode() { [[ "$1" == split-prepared ]] && echo prepared || echo simple; }
# CPU of the whole Postgres server in clock ticks: the postmaster and its live children, plus the children already
# exited (reaped into the postmaster's cutime/cstime), so a cell's pgbench backends count after they are gone.
PM_PID=$(head -1 "$(psql -At "$TARGET" -c 'SHOW data_directory')/postmaster.pid" 2>/dev/null || true)
pg_ticks() {
  [[ -n "$PM_PID" ]] || { echo 0; return; }
  { awk '{print $14 + $15 + $16 + $17}' "/proc/$PM_PID/stat"
    # A backend that exits between pgrep and its read is counted through the postmaster's cutime/cstime instead:
    # its failed read must not end the run (set -e, pipefail).
    for c in $(pgrep -P "$PM_PID"); do awk '{print $14 + $15}' "/proc/$c/stat" 2>/dev/null || true; done; } |
    awk '{s += $1} END {print s}'
}
TICK_US=$((1000000 / $(getconf CLK_TCK)))
declare -A TPS CPU
for ((round = 1; round <= ROUNDS; round++)); do
  # Rotate the order each round so no shape always runs first or last.
  for ((i = 0; i < ${#SHAPES[@]}; i++)); do
    s="${SHAPES[$(((i + round) % ${#SHAPES[@]}))]}"
    before=$(pg_ticks)
    out=$(pgbench -n -M "$(mode "$s")" -D prepared=0 -c 16 -j 2 -T "$SECONDS_PER_CELL" -f "$DIR/$s.sql" "$TARGET" 2>/dev/null)
    sleep 0.3 # let the postmaster reap the cell's backends
    tps=$(awk '/^tps/ {print int($3)}' <<<"$out")
    txs=$(awk '/number of transactions actually processed/ {print $NF}' <<<"$out" | cut -d/ -f1)
    cpu=$(( ($(pg_ticks) - before) * TICK_US / (txs > 0 ? txs : 1) ))
    TPS[$s]="${TPS[$s]:-} $tps"
    CPU[$s]="${CPU[$s]:-} $cpu"
    echo "round $round  $s  $tps tps  $cpu µs Postgres CPU per transaction"
  done
done
echo
median() { # values separated by spaces or lines, printf format: the middle value, or - when there is none
  tr ' ' '\n' <<<"$1" | sed '/^$/d' | sort -g |
    awk -v fmt="${2:-%s}" '{a[NR] = $1} END {if (NR) printf fmt, a[int((NR + 1) / 2)]; else printf "-"}'
}
median_ratio() { # shape, reference shape: the median over rounds of tps(shape) / tps(reference)
  median "$(paste <(tr ' ' '\n' <<<"${TPS[$1]}" | sed '/^$/d') <(tr ' ' '\n' <<<"${TPS[$2]:-}" | sed '/^$/d') |
    awk '$2 > 0 {print $1 / $2}')" '%.2f'
}
printf '%-15s %-36s %-8s %-14s %s\n' shape "tps per round" "÷ bare" "Postgres µs/tx" "÷ pay-plain (payment shapes)"
for s in "${SHAPES[@]}"; do
  printf '%-15s %-36s %-8s %-14s %s\n' "$s" "${TPS[$s]}" "$(median_ratio "$s" bare)" "$(median "${CPU[$s]}")" \
    "$([[ $s == pay-* ]] && median_ratio "$s" pay-plain)"
done
# Completions update the row the claim inserted; HOT updates (no new index entries) keep them cheap.
psql -At "$TARGET" -c "SELECT 'completion updates on idempotency_keys: ' || n_tup_upd || ', of which HOT: ' || n_tup_hot_upd FROM pg_stat_user_tables WHERE relname = 'idempotency_keys'"
