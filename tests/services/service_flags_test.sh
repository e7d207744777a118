#!/usr/bin/env bash
# The start-up flag checks of the four services, run on the real binaries.
#
# Refused: exit 2 and exactly one line on stderr naming the bad flag, before
# anything is bound or written. An audit found --listen=127.0.0.1:65537 bound
# port 1 (gRPC takes the port modulo 65536), --listen=garbage exited 1 after a
# raw gRPC log line, an unwritable --db_path / --histdb_path / --port_file
# exited 1 with "UNAVAILABLE: cannot open RocksDB", statemgr scattered RocksDB
# files into a directory of someone else's files, broker --predictor=:99999
# and predictor --broker=:99999 started, and several checks printed one
# combined message for many flags. A later audit found broker --data_dir
# unchecked: a file or /proc/nope/db exited 1 with an INTERNAL RocksDB
# error, and a directory of other files got a RocksDB among them; and a peer
# address without a port (statemgr --broker=localhost, broker
# --predictor=localhost: gRPC dials port 443) started, as did a monitor with
# --proc_root=/nonexistent (logging a sampling error every period).
#
# Accepted: each service still serves on --listen=127.0.0.1:0 (the port it
# logs is the one in --port_file and accepts a connection), a second instance
# on that port exits 1 ("Address already in use": gRPC's default SO_REUSEPORT
# used to let it start and share the port), and SIGTERM stops it with exit 0.
# usage: service_flags_test.sh BIN_DIR
set -uo pipefail
bin_dir=$1
failures=0
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

touch "$tmp/file"
mkdir "$tmp/foreign" "$tmp/empty" "$tmp/stat-dir" "$tmp/stat-dir/stat" "$tmp/fake-proc"
echo "not a database" >"$tmp/foreign/notes.txt"
# A /proc as the monitor reads it (services/monitor/proc_sampler.cc).
printf 'cpu  100 0 50 800 10 0 0 0 0 0\ncpu0 100 0 50 800 10 0 0 0 0 0\n' >"$tmp/fake-proc/stat"
printf 'MemTotal: 8388608 kB\nMemAvailable: 4194304 kB\n' >"$tmp/fake-proc/meminfo"
mkdir "$tmp/no-meminfo" && cp "$tmp/fake-proc/stat" "$tmp/no-meminfo/stat"

fail() {
  echo "FAIL: $*"
  failures=$((failures + 1))
}

# Per-service flags that keep a run away from shared paths and ports.
base_flags() {
  case $1 in
    statemgr) echo "--db_path=$tmp/statemgr-db" ;;
    predictor) echo "--histdb_path=$tmp/histdb --broker=127.0.0.1:1" ;;
    monitor) echo "--statemgr=127.0.0.1:1 --host=flags-test" ;;
    *) ;;
  esac
}

# refused SERVICE REGEX FLAG...: exit 2, one stderr line matching REGEX.
refused() {
  local svc=$1 want=$2
  shift 2
  local err rc lines
  # shellcheck disable=SC2046
  err=$(timeout 10 "$bin_dir/$svc" --listen=127.0.0.1:0 --metrics_listen= $(base_flags "$svc") \
        "$@" 2>&1 >/dev/null)
  rc=$?
  lines=$(printf '%s' "$err" | grep -c '')
  if [ "$rc" -ne 2 ] || [ "$lines" -ne 1 ] || ! grep -Eq -- "$want" <<<"$err"; then
    fail "$svc $*: exit $rc (want 2), $lines stderr lines (want 1), want /$want/:"
    printf '%s\n' "$err"
  else
    echo "ok: $svc $* -> $err"
  fi
}

for svc in broker predictor statemgr monitor; do
  refused "$svc" "--listen: port must be in \[0, 65535\], got 65537" --listen=127.0.0.1:65537
  refused "$svc" "--listen: port must be in \[0, 65535\], got 99999" --listen=127.0.0.1:99999
  refused "$svc" "--listen: 'garbage' has no :PORT" --listen=garbage
  refused "$svc" "--listen is empty" --listen=
  refused "$svc" "--listen: ':7401' has no host" --listen=:7401
  refused "$svc" "--listen: '999\.1\.1\.1:0' has no valid IPv4 address" --listen=999.1.1.1:0
  refused "$svc" "--listen: '::1:0' is an IPv6 address without brackets" --listen=::1:0
  # 192.0.2.0/24 is TEST-NET-1 (RFC 5737): never an address of this machine.
  refused "$svc" "--listen: '192\.0\.2\.1' in '192\.0\.2\.1:0' is not an address of this machine" \
    --listen=192.0.2.1:0
  refused "$svc" "--metrics_listen: port must be in \[0, 65535\], got 65536" \
    --metrics_listen=127.0.0.1:65536
  refused "$svc" "--metrics_listen: 'garbage' has no :PORT" --metrics_listen=garbage
  refused "$svc" "--port_file: cannot write $tmp/file/ports" --port_file="$tmp/file/ports"
  refused "$svc" "--port_file: cannot write $tmp: it is a directory" --port_file="$tmp"
done

refused broker "^E .*--threads must be in \[1, 1024\], got 0$" --threads=0
refused broker "^E .*--fanout_threads must be in \[0, 1024\].*got -1$" --fanout_threads=-1
refused broker "^E .*--horizon_seconds must be in \[1, 604800\].*got 0$" --horizon_seconds=0
refused broker "^E .*--cache_ttl_seconds must be >= 0, got -1$" --cache_ttl_seconds=-1
refused broker "^E .*--history_retry_seconds must be in \[1, 86400\], got 0$" --history_retry_seconds=0
# Job expiry: 0 (never) or at least an hour.
refused broker "^E .*--expire_waiting_jobs_after_seconds must be in \[3600, 316224000\] or 0 to keep waiting jobs until they are reported.*got 60$" \
  --expire_waiting_jobs_after_seconds=60
refused broker "^E .*--expire_running_jobs_after_seconds must be in \[3600, 316224000\].*got -1$" \
  --expire_running_jobs_after_seconds=-1
refused broker "--predictor '127\.0\.0\.1:99999': the port must be in \[1, 65535\]" \
  --predictor=127.0.0.1:99999
refused broker "--predictor is required" --predictor=
# A peer address without a port: gRPC would dial port 443.
refused broker "--predictor 'localhost' is not HOST:PORT \(no port" --predictor=localhost
refused broker "--predictor 'predictor:7402x' is not HOST:PORT \(the port must be a number" \
  --predictor=predictor:7402x
refused broker "--data_dir: '$tmp/file' exists and is not a directory" --data_dir="$tmp/file"
refused broker "--data_dir: '/proc/nope/db' cannot be created: its parent directory '/proc/nope'" \
  --data_dir=/proc/nope/db
refused broker "--data_dir: '$tmp/foreign' holds other files but no RocksDB database" \
  --data_dir="$tmp/foreign"

refused predictor "--broker '127\.0\.0\.1:99999': the port must be in \[1, 65535\]" \
  --broker=127.0.0.1:99999
refused predictor "--broker 'localhost' is not HOST:PORT \(no port" --broker=localhost
refused predictor "^E .*--utc_offset_seconds must be in \[-50400, 50400\].*got 999999$" \
  --utc_offset_seconds=999999
refused predictor "^E .*--history_days must be in \[0, 3650\].*got 99999999$" \
  --history_days=99999999
refused predictor "^E .*--history_days must be in \[0, 3650\].*got -1$" --history_days=-1
refused predictor "^E .*--time_zone: unknown time zone 'Mars/Olympus_Mons'" \
  --time_zone=Mars/Olympus_Mons
refused predictor "^E .*--time_zone: unknown time zone '\.\./\.\./etc/passwd'" \
  --time_zone=../../etc/passwd
refused predictor "--histdb_path: '$tmp/file' exists and is not a directory" \
  --histdb_path="$tmp/file"
refused predictor "--histdb_path: '$tmp/missing/db' cannot be created: its parent directory" \
  --histdb_path="$tmp/missing/db"
refused predictor "--histdb_path: '$tmp/foreign' holds other files but no RocksDB database" \
  --histdb_path="$tmp/foreign"

refused statemgr "^E .*--default_period_seconds must be in \[1, 86400\], got -1$" \
  --default_period_seconds=-1
refused statemgr "^E .*--grace_seconds must be in \[0, 31536000\].*got -1$" --grace_seconds=-1
refused statemgr "^E .*--revocation_gap_seconds must be in \[1, 31536000\].*got 0$" \
  --revocation_gap_seconds=0
refused statemgr "^E .*--th1 must be a number in \(0, 1\], got 0$" --th1=0
refused statemgr "^E .*--th2 must be a number in \[--th1, 1\] = \[0\.7, 1\], got 0\.6$" --th1=0.7
refused statemgr "^E .*--usage_clusters must be in \[1, 100\], got 0$" --usage_clusters=0
refused statemgr "^E .*--utc_offset_seconds must be in .*got 50401$" --utc_offset_seconds=50401
refused statemgr "--broker '127\.0\.0\.1:99999': the port must be in" --broker=127.0.0.1:99999
refused statemgr "--broker 'localhost' is not HOST:PORT \(no port" --broker=localhost
refused statemgr "--advertise_address 'localhost' is not HOST:PORT" --advertise_address=localhost
refused statemgr "--db_path is empty" --db_path=
refused statemgr "--db_path: '$tmp/file' exists and is not a directory" --db_path="$tmp/file"
refused statemgr "--db_path: '$tmp/file/db' cannot be created: '$tmp/file' is not a directory" \
  --db_path="$tmp/file/db"
refused statemgr "--db_path: '$tmp/missing/db' cannot be created: its parent directory" \
  --db_path="$tmp/missing/db"
refused statemgr "--db_path: '$tmp/foreign' holds other files but no RocksDB database" \
  --db_path="$tmp/foreign"

# --backup_dir (common/db_backup.h): outside the database, a directory of
# backups or empty, with a database to back up; refused before anything opens.
refused statemgr "--backup_dir '$tmp/statemgr-db/backups' is inside the database \(--db_path" \
  --backup_dir="$tmp/statemgr-db/backups"
refused statemgr "--backup_dir '$tmp' holds the database \(--db_path" --backup_dir="$tmp"
refused statemgr "--backup_dir '$tmp/file' exists and is not a directory" --backup_dir="$tmp/file"
refused statemgr "--backup_dir '$tmp/foreign' holds other files but no backups" \
  --backup_dir="$tmp/foreign"
refused statemgr "--backup_dir '$tmp/file/b' cannot be created" --backup_dir="$tmp/file/b"
refused statemgr "^E .*--backup_interval_seconds must be in \[60, 31622400\].*got 10$" \
  --backup_dir="$tmp/b" --backup_interval_seconds=10
refused predictor "^E .*--backup_keep must be in \[1, 1000\], got 0$" --backup_dir="$tmp/b" \
  --backup_keep=0
refused predictor "--backup_dir needs a database to back up, and --histdb_path is empty" \
  --backup_dir="$tmp/b" --histdb_path=
refused broker "--backup_dir needs a database to back up, and --data_dir is empty" \
  --backup_dir="$tmp/b"
[ -e "$tmp/b" ] && fail "a refused --backup_dir was created"

# --retention_days: 0 (keep every sample) or at least two weeks of history.
refused statemgr "^E .*--retention_days must be in \[14, 36600\] or 0 to keep every sample.*got 3$" \
  --retention_days=3
refused statemgr "^E .*--retention_days must be in \[14, 36600\].*got -1$" --retention_days=-1

# The disk reserve (--min_free_disk_mb): RocksDB 7.8 aborted on a full disk,
# at start-up too, and left a directory holding only its LOG behind. Here
# the reserve is above any disk: refused, and nothing is created.
huge=1099511627776
refused statemgr "only .* MiB free on the disk of --db_path '$tmp/full-db', below the $huge MiB" \
  --db_path="$tmp/full-db" --min_free_disk_mb=$huge
refused broker "only .* MiB free on the disk of --data_dir '$tmp/full-q', below the $huge MiB" \
  --data_dir="$tmp/full-q" --min_free_disk_mb=$huge
refused predictor "only .* MiB free on the disk of --histdb_path '$tmp/full-h', below" \
  --histdb_path="$tmp/full-h" --min_free_disk_mb=$huge
refused statemgr "--min_free_disk_mb must be in \[0, $huge\]" --min_free_disk_mb=-1
for d in full-db full-q full-h; do
  [ -e "$tmp/$d" ] && fail "$d was created despite the refusal"
done
if [ "$(ls "$tmp/foreign")" != "notes.txt" ]; then
  fail "a refused --db_path / --histdb_path / --data_dir got files: $(ls "$tmp/foreign" | tr '\n' ' ')"
fi
if [ -e "$tmp/statemgr-db" ] || [ -e "$tmp/histdb" ]; then
  fail "a refused start created a database directory"
fi

# The monitor accepts the thresholds the state manager accepts (its gateway
# classifies with the state manager's classifier).
refused monitor "^E .*--th1 must be a number in \(0, 1\], got 0$" --th1=0
refused monitor "^E .*--th2 must be a number in \[--th1, 1\] = \[0\.2, 1\], got 1\.5$" --th2=1.5
refused monitor "^E .*--grace_seconds must be in \[0, 31536000\].*got -1$" --grace_seconds=-1
refused monitor "--statemgr 'localhost' is not HOST:PORT \(no port" --statemgr=localhost
refused monitor "--statemgr is required" --statemgr=
# Every sample reads <proc_root>/stat and /meminfo: a monitor without them
# used to serve and log a sampling error every period.
refused monitor "^E .*--proc_root: cannot read /nonexistent/stat$" --proc_root=/nonexistent
refused monitor "^E .*--proc_root: cannot read $tmp/foreign/stat$" --proc_root="$tmp/foreign"
refused monitor "^E .*--proc_root: no cpu line in $tmp/stat-dir/stat$" --proc_root="$tmp/stat-dir"
refused monitor "^E .*--proc_root: cannot read $tmp/no-meminfo/meminfo$" --proc_root="$tmp/no-meminfo"

# Accepted: serve on port 0, refuse a second instance on the port taken.
# served SERVICE [FLAG...]
served() {
  local svc=$1
  shift
  local ports="$tmp/$svc.ports" line="" port="" fd pid
  # shellcheck disable=SC2046
  exec {fd}< <(exec "$bin_dir/$svc" --listen=127.0.0.1:0 --metrics_listen=127.0.0.1:0 \
                 --port_file="$ports" $(base_flags "$svc") "$@" 2>&1)
  pid=$!
  # The start-up line names the bound port; read blocks until it comes.
  while IFS= read -r -t 30 -u "$fd" line; do
    if [[ $line =~ (serving on|monitor of host flags-test on)\ 127\.0\.0\.1:([0-9]+) ]]; then
      port=${BASH_REMATCH[2]}
      break
    fi
    echo "  $svc: $line"
  done
  if [ -z "$port" ] || [ "$port" -eq 0 ]; then
    fail "$svc --listen=127.0.0.1:0 did not start serving (last line: $line)"
    kill -KILL "$pid" 2>/dev/null
    exec {fd}<&-
    return
  fi
  echo "ok: $svc $* serves on 127.0.0.1:$port"
  grep -qx "grpc_port=$port" "$ports" || fail "$svc: --port_file holds $(cat "$ports"), not $port"
  if ! (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; then
    fail "$svc: nothing accepts connections on 127.0.0.1:$port"
  fi
  local err rc
  # shellcheck disable=SC2046
  err=$(timeout 20 "$bin_dir/$svc" --listen="127.0.0.1:$port" --metrics_listen= \
        $(base_flags "$svc" | sed "s|$tmp/|$tmp/second-|g") 2>&1 >/dev/null)
  rc=$?
  if [ "$rc" -ne 1 ] || [ "$(printf '%s' "$err" | grep -c '')" -ne 1 ] ||
     ! grep -q -- "--listen: cannot listen on 127.0.0.1:$port (Address already in use)" <<<"$err"; then
    fail "$svc: a second instance on 127.0.0.1:$port: exit $rc (want 1, one line): $err"
  else
    echo "ok: a second $svc on port $port -> exit 1: $err"
  fi
  kill -TERM "$pid"
  cat <&"$fd" >/dev/null  # to EOF: the service has exited
  wait "$pid"
  rc=$?
  exec {fd}<&-
  [ "$rc" -eq 0 ] || fail "$svc exited $rc on SIGTERM (want 0)"
}

for svc in broker predictor statemgr monitor; do
  served "$svc"
done
# A --db_path holding a RocksDB (the one statemgr just created) or nothing at
# all is accepted.
[ -e "$tmp/statemgr-db/CURRENT" ] || fail "statemgr did not create its RocksDB in --db_path"
served statemgr --db_path="$tmp/statemgr-db"
served statemgr --db_path="$tmp/empty/"
[ -e "$tmp/empty/CURRENT" ] || fail "statemgr did not create its RocksDB in an empty --db_path"
# The same for the broker's --data_dir: a new directory, then the RocksDB job
# queue the first run left in it.
served broker --data_dir="$tmp/broker-jobs"
[ -e "$tmp/broker-jobs/CURRENT" ] || fail "broker did not create its RocksDB in --data_dir"
served broker --data_dir="$tmp/broker-jobs"

# A damaged database (its CURRENT file overwritten) stops the service with
# exit 1 and one line naming the flag, the directory and what to do (the
# predictor's said only "histdb open: Corruption: ...").
damaged() {
  local svc=$1 flag=$2 dir=$3 err rc
  rm -rf "$dir-damaged" && cp -r "$dir" "$dir-damaged" && echo garbage >"$dir-damaged/CURRENT"
  # shellcheck disable=SC2046
  err=$(timeout 20 "$bin_dir/$svc" --listen=127.0.0.1:0 --metrics_listen= $(base_flags "$svc") \
        "$flag=$dir-damaged" 2>&1 >/dev/null)
  rc=$?
  if [ "$rc" -ne 1 ] || [ "$(printf '%s' "$err" | grep -c '')" -ne 1 ] ||
     ! grep -q -- "$flag $dir-damaged: DATA_LOSS: .*Corruption.*restore it from a backup" <<<"$err"
  then
    fail "$svc with a damaged $flag: exit $rc (want 1, one line naming it): $err"
  else
    echo "ok: $svc with a damaged $flag -> exit 1: $err"
  fi
}
[ -e "$tmp/histdb/CURRENT" ] || fail "predictor did not create its RocksDB in --histdb_path"
damaged statemgr --db_path "$tmp/statemgr-db"
damaged predictor --histdb_path "$tmp/histdb"
damaged broker --data_dir "$tmp/broker-jobs"

# Peer addresses as the sojourn CLI dials them: HOST:PORT, or a gRPC target
# with a scheme (nothing listens there: the services start all the same and
# retry in the background); empty where it means none.
served statemgr --broker="dns:///127.0.0.1:1"
served predictor --broker="unix:$tmp/no-broker.sock"
served predictor --broker=
served broker --predictor="unix:$tmp/no-predictor.sock"
served monitor --statemgr="dns:///localhost:1"
# A directory laid out like /proc, as the monitor's tests use.
served monitor --proc_root="$tmp/fake-proc"

if [ "$failures" -ne 0 ]; then
  echo "$failures failure(s)"
  exit 1
fi
echo "all passed"
