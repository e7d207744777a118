// sojourn: command-line client of a sojourn cluster.
//
//   sojourn hosts [--json]
//   sojourn availability --host H --window 2h [--start T] [--history-days N] [--curve N] [--baselines] [--json]
//   sojourn rank --duration 4h [--cpu 1.0] [--memory-mb 512] [--min-mhz M] [--hosts H,..]
//                [--policy P] [--json]
//   sojourn guest [--pid N [--unregister]] [--monitor ADDR] [--json]
//   sojourn watch [--host H] [--statemgr ADDR,...] [--no-snapshot] [--json]
//   sojourn export [--hosts H,..] [--statemgr ADDR,...] [--since 30d] [--out FILE]
//   sojourn turnaround --procs N (--nodes N | --snapshot FILE | --queue) [--requested D] [--json]
//   sojourn job-event [--file FILE] [--json]
//   sojourn jobs [list | submit | start | finish | cancel] [options] [--json]
//
// Addresses: --broker (env SOJOURN_BROKER, default 127.0.0.1:7401) and
// --predictor (env SOJOURN_PREDICTOR, default 127.0.0.1:7402).
#include <google/protobuf/util/json_util.h>
#include <grpc/support/log.h>
#include <grpcpp/grpcpp.h>
#include <poll.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/time/time.h"
#include "common/build_info.h"
#include "common/cli_util.h"
#include "common/hash.h"
#include "common/output_file.h"
#include "common/proc_stat.h"
#include "common/text.h"
#include "common/tls.h"
#include "models/traces/traces.h"
#include "models/turnaround/evaluation.h"
#include "models/turnaround/swf.h"
#include "services/job_spec.h"
#include "services/predictor/turnaround_convert.h"
#include "sojourn/v1/broker.grpc.pb.h"
#include "sojourn/v1/monitor.grpc.pb.h"
#include "sojourn/v1/predictor.grpc.pb.h"
#include "sojourn/v1/statemgr.grpc.pb.h"

namespace {

constexpr char kProgram[] = "sojourn";

const char kUsage[] =
    "usage: sojourn COMMAND [options]\n"
    "\n"
    "Command-line client of a sojourn cluster (see README.md).\n"
    "\n"
    "commands:\n"
    "  hosts                      list the hosts registered with the broker\n"
    "  availability --host H --window DURATION [--start T] [--history-days N] [--curve N] [--baselines]\n"
    "                             temporal reliability TR of host H over the next DURATION,\n"
    "                             MTTF, and N points of the TR curve\n"
    "  rank --duration DURATION [--cpu CPUS] [--memory-mb MB] [--min-mhz MHZ]\n"
    "       [--hosts H1,H2,...] [--policy proactive|condor|round_robin|tr]\n"
    "       [--include-busy]\n"
    "                             rank every host for a job of that length and needs\n"
    "                             (default policy proactive): the figures behind each\n"
    "                             place (TR, MTTF, JCT, JCTF, ETL, load) and the reason\n"
    "                             for hosts that cannot take the job\n"
    "  usage --host H [--resource cpu|mem] --hours N\n"
    "                             predicted use of H for the next N hours (5-minute steps)\n"
    "  can-run --host H [--cpu FREE] [--memory-mb MB] --hours N\n"
    "                             will H keep FREE of its CPU (fraction 0..1) and MB MiB free for\n"
    "                             N hours?\n"
    "  how-long --host H [--cpu FREE] [--memory-mb MB]\n"
    "                             for how long (hours, at most 72) it will\n"
    "  guest [--pid N [--unregister]] [--monitor ADDR]\n"
    "                             register (or unregister) a guest process with this host's\n"
    "                             monitor, then show its guests and gateway mode\n"
    "  watch [--host H] [--statemgr ADDR,...] [--no-snapshot]\n"
    "                             follow the hosts' state changes (S1..S5) as the state\n"
    "                             managers see them, until Ctrl-C\n"
    "  export [--hosts H1,H2,...] [--statemgr ADDR,...] [--since DURATION] [--out FILE]\n"
    "                             write the samples the state managers hold as a host trace\n"
    "                             (canonical CSV) to backtest (sojourn-eval availability) or\n"
    "                             replay (sojourn-replay)\n"
    "  export-jobs [--since DURATION] [--nodes N] [--out FILE]\n"
    "                             write the finished jobs of the predictor's job history as an\n"
    "                             SWF log to backtest (sojourn-eval turnaround --swf FILE)\n"
    "  import-jobs --swf FILE     add the jobs of an SWF log (a batch system's, or one\n"
    "                             export-jobs wrote) to the predictor's job history\n"
    "  turnaround --procs N (--nodes N | --snapshot FILE | --queue) [--requested DURATION]\n"
    "             [--user U] [--executable E] ...\n"
    "                             when a parallel job submitted now would start and end:\n"
    "                             wait, run and turnaround time with intervals from the\n"
    "                             historical, simulation and hybrid kernels (--queue: on the\n"
    "                             broker's hosts and job queue)\n"
    "  job-event [--file FILE]    record job events (JSON, one per line) in the predictor's\n"
    "                             job history, which the turnaround kernels learn from\n"
    "  jobs [list|submit|start|finish|cancel] [--job-id N] [--procs N] [--hosts H1,H2,...]\n"
    "                             the broker's job queue: list it, or report a job submitted,\n"
    "                             started on hosts, finished or cancelled (forwarded to the\n"
    "                             predictor's job history with the cluster as it was)\n"
    "\n"
    "`sojourn COMMAND --help` lists a command's options with their defaults.\n"
    "\n"
    "common options:\n"
    "  --json                     print the answer as JSON (proto field names)\n"
    "  --broker ADDR              broker address (env SOJOURN_BROKER, default 127.0.0.1:7401)\n"
    "  --predictor ADDR           predictor address (env SOJOURN_PREDICTOR, default "
    "127.0.0.1:7402)\n"
    "  --timeout SECONDS          per-call deadline (default 30)\n"
    "  --tls-ca FILE              TLS: the CA (PEM) that signed the services' certificates\n"
    "                             (env SOJOURN_TLS_CA; without it, plaintext)\n"
    "  --tls-cert FILE, --tls-key FILE\n"
    "                             this client's certificate and key (PEM), for services that\n"
    "                             require one (env SOJOURN_TLS_CERT, SOJOURN_TLS_KEY)\n"
    "\n"
    "DURATION: 2h, 90m, 45s, 1h30m, 2d or seconds. Exit codes: 0 ok, 2 bad usage or rejected\n"
    "request, 1 cluster unreachable or other failure. 'sojourn --version' names the build.\n";

// Appended to every command's help.
const char kCommonHelp[] =
    "\n"
    "common options:\n"
    "  --json                 print the answer as JSON (proto field names)\n"
    "  --timeout SECONDS      per-call deadline (default 30)\n"
    "  --tls-ca FILE          TLS: the CA (PEM) that signed the services' certificates\n"
    "                         (env SOJOURN_TLS_CA; without it, plaintext)\n"
    "  --tls-cert FILE        this client's certificate (PEM), for services that require one\n"
    "                         (env SOJOURN_TLS_CERT); --tls-key FILE: its key (SOJOURN_TLS_KEY)\n"
    "\n"
    "Exit codes: 0 ok, 2 bad usage or rejected request, 1 cluster unreachable or other "
    "failure.\n";
const char kBrokerHelp[] =
    "  --broker ADDR          broker address (env SOJOURN_BROKER, default 127.0.0.1:7401)\n";
const char kPredictorHelp[] =
    "  --predictor ADDR       predictor address (env SOJOURN_PREDICTOR, default "
    "127.0.0.1:7402)\n";

const char kHostsHelp[] =
    "usage: sojourn hosts [--json] [--broker ADDR]\n"
    "\n"
    "Lists the hosts registered with the broker: liveness, state manager, cores, memory,\n"
    "clock rate, availability state (S1 idle .. S5 gone) and since when, as the host's\n"
    "state manager reported them at its last heartbeat, and that heartbeat's time.\n"
    "\n"
    "options:\n";

const char kAvailabilityHelp[] =
    "usage: sojourn availability --host H --window DURATION [options]\n"
    "\n"
    "Temporal reliability TR of host H (probability that it stays usable) over the next\n"
    "DURATION, its MTTF restricted to the window, and optionally points of the TR curve.\n"
    "\n"
    "options:\n"
    "  --host H               the host (required)\n"
    "  --window DURATION      the window: 2h, 90m, 1h30m, 2d or seconds, at most 7 days\n"
    "                         (required)\n"
    "  --start T              when the window starts (default: now, the host's newest\n"
    "                         sample): +DURATION from now (+14h), a date-time with its\n"
    "                         UTC offset (2026-12-09T09:00+01:00, 2026-12-09T08:00Z) or\n"
    "                         Unix seconds; at most a year ahead. A start in the past is\n"
    "                         predicted from the history before it\n"
    "  --history-days N       use the most recent N days of the same day type; an integer\n"
    "                         in [0, 36500] (default 0 = the predictor's setting, all days\n"
    "                         by default)\n"
    "  --curve N              also print N points of the TR curve, an integer in\n"
    "                         [0, 100000] (default 0 = none)\n"
    "  --baselines            also print what the estimators deployed systems use today say\n"
    "                         of the window: HTCondor's AvailTime statistics (survival of the\n"
    "                         host's past availability intervals longer than its up-time) and\n"
    "                         BOINC's on-fraction (time up, 10-day exponential weighting)\n"
    "  --statemgr ADDR        the host's state manager (default: the predictor asks its\n"
    "                         broker; needed with a predictor that has no --broker)\n";

const char kRankHelp[] =
    "usage: sojourn rank --duration DURATION [options]\n"
    "\n"
    "Ranks every registered host for a job of that length and needs: the figures behind each\n"
    "place (TR, MTTF, JCT, JCTF, ETL, load) and the reason for hosts that cannot take it.\n"
    "Exits 1 when the cluster (broker or predictor) cannot be reached.\n"
    "\n"
    "options:\n"
    "  --duration DURATION    the job's run time: 2h, 90m, 45s, 1h30m or seconds (required,\n"
    "                         at most 7 days)\n"
    "  --cpu CPUS             CPUs (cores) the job needs, > 0; may exceed 1 for a job using\n"
    "                         several cores (default 1.0). Not the same as can-run's --cpu.\n"
    "  --memory-mb MB         memory the job needs, MiB (default 0 = not checked)\n"
    "  --min-mhz MHZ          minimum CPU clock rate (default 0 = any)\n"
    "  --hosts H1,H2,...      rank only among these hosts (default: all)\n"
    "  --policy P             proactive, condor, round_robin or tr (default proactive)\n"
    "  --include-busy         rank hosts that already run a job of the broker's queue (`sojourn\n"
    "                         jobs`) as if free; by default a host at the broker's\n"
    "                         --mpl_limit cannot take the job\n";

const char kUsageHelp[] =
    "usage: sojourn usage --host H --hours N [options]\n"
    "\n"
    "Predicted use of host H for the next N hours in 5-minute steps, and the forecaster that\n"
    "answered. A host whose monitor has just started is answered from its first samples\n"
    "(method persist: a guess); one with no sample in the last 24 hours is refused ('not\n"
    "enough history yet').\n"
    "\n"
    "options:\n"
    "  --host H               the host (required)\n"
    "  --hours N              how far ahead, a number in (0, 72] (required)\n"
    "  --resource R           cpu or mem (default cpu)\n";

const char kCanRunHelp[] =
    "usage: sojourn can-run --host H --hours N [options]\n"
    "\n"
    "Whether host H is predicted to keep the given CPU fraction and memory free for the\n"
    "next N hours. A host whose monitor has just started is judged from its first samples\n"
    "alone; one with no sample in the last 24 hours is refused ('not enough history yet').\n"
    "\n"
    "options:\n"
    "  --host H               the host (required)\n"
    "  --hours N              how long, a number in (0, 72] (required)\n"
    "  --cpu FREE             fraction of the host's CPU that must stay free, in [0, 1]\n"
    "                         (default 0 = not checked). Not the same as rank's --cpu.\n"
    "  --memory-mb MB         MiB of memory that must stay free (default 0 = not checked)\n"
    "At least one of --cpu and --memory-mb must be above 0.\n";

const char kHowLongHelp[] =
    "usage: sojourn how-long --host H [options]\n"
    "\n"
    "For how long (hours, at most 72) host H is predicted to keep the given CPU fraction and\n"
    "memory free. A host whose monitor has just started is judged from its first samples\n"
    "alone; one with no sample in the last 24 hours is refused ('not enough history yet').\n"
    "\n"
    "options:\n"
    "  --host H               the host (required)\n"
    "  --cpu FREE             fraction of the host's CPU that must stay free, in [0, 1]\n"
    "                         (default 0 = not checked). Not the same as rank's --cpu.\n"
    "  --memory-mb MB         MiB of memory that must stay free (default 0 = not checked)\n"
    "At least one of --cpu and --memory-mb must be above 0.\n";

const char kGuestHelp[] =
    "usage: sojourn guest [--pid N [--unregister]] [options]\n"
    "\n"
    "Registers process N as a guest with the monitor of this host (its CPU use no longer\n"
    "counts as host load; with the monitor's --gateway it is reniced, suspended, resumed\n"
    "and terminated as the host's state calls for), or unregisters it; then prints the\n"
    "monitor's guests and its gateway mode. Without --pid, only prints them.\n"
    "\n"
    "options:\n"
    "  --pid N                the guest's process id, an integer in [1, 4194304]\n"
    "  --unregister           unregister N instead\n"
    "  --monitor ADDR         monitor address (env SOJOURN_MONITOR, default 127.0.0.1:7405)\n";

const char kWatchHelp[] =
    "usage: sojourn watch [--host H] [--statemgr ADDR,...] [options]\n"
    "\n"
    "Follows the hosts' availability states (S1 idle, S2 busy, S3 overloaded, S4 memory\n"
    "short, S5 gone) as their state managers classify the samples: first each host's current\n"
    "state, then one line per change with its reason, until Ctrl-C. A host silent for longer\n"
    "than its revocation gap is reported S5 within a few seconds. Without --statemgr, watches\n"
    "every state manager registered with the broker. With --json, one JSON object per line.\n"
    "Exits 1 when a state manager cannot be reached (refused, or not connected within\n"
    "--timeout) or ends the stream (e.g. shutting down): the first one to end ends the\n"
    "watch of all. Exits 0 when the reader of its output goes away (`sojourn watch | head -1`).\n"
    "\n"
    "options:\n"
    "  --host H               only this host (default: every host, also hosts that appear\n"
    "                         later)\n"
    "  --statemgr ADDR,...    state managers to watch (default: those registered with the\n"
    "                         broker; one is needed for a host not registered yet)\n"
    "  --no-snapshot          leave out the current states; only changes from now on\n";

const char kExportHelp[] =
    "usage: sojourn export [--hosts H1,H2,...] [--statemgr ADDR,...] [--since DURATION]\n"
    "                      [--out FILE] [--skip-unreadable]\n"
    "\n"
    "Writes the samples the state managers hold as a host trace in the canonical format\n"
    "(DESIGN.md \"Trace formats\"): CSV with the header\n"
    "host,timestamp,cpu_load,free_mem_mb,total_mem_mb,cpu_cores, hosts in name order, each\n"
    "host's samples oldest first; load, free memory, memory and cores exactly as stored (the\n"
    "swap rates are not written). The cluster's own history can then be backtested with the\n"
    "papers' protocol beside the baselines (sojourn-eval availability --trace FILE;\n"
    "docs/EVALUATION.md \"Backtesting a cluster's own history\") or replayed into another\n"
    "state manager (sojourn-replay --trace FILE). One line per host on stderr.\n"
    "Exits 2 when FILE cannot be created or a host is not found (named in --hosts but not\n"
    "listed, or no longer held by its state manager), 1 when a state manager cannot be\n"
    "reached; FILE is then not written, nor when Ctrl-C or TERM stops the export.\n"
    "\n"
    "options:\n"
    "  --hosts H1,H2,...      only these hosts (default: every host)\n"
    "  --statemgr ADDR,...    read the hosts these state managers hold, also hosts no longer\n"
    "                         registered (default: the hosts registered with the broker,\n"
    "                         each from the state manager the broker names for it)\n"
    "  --since DURATION       only the samples of the last DURATION (30d, 12h, ...; default:\n"
    "                         all the state managers hold)\n"
    "  --out FILE             write to FILE instead of standard output (a name ending in\n"
    "                         .gz is gzip-compressed); it is written as FILE.tmp and renamed\n"
    "                         once complete\n"
    "  --skip-unreadable      leave out, with a warning, the hosts whose samples cannot be\n"
    "                         read (a retired host the broker still lists, a state manager\n"
    "                         down) instead of failing; the summary names them. Fails all\n"
    "                         the same when no host at all could be read\n";

const char kExportJobsHelp[] =
    "usage: sojourn export-jobs [--since DURATION] [--nodes N] [--out FILE]\n"
    "\n"
    "Writes the finished jobs of the predictor's job history (the records the turnaround\n"
    "kernels learn from) as a log in the Standard Workload Format (SWF 2.2) of the Parallel\n"
    "Workloads Archive, in submit order, so that the cluster's own jobs can be backtested with\n"
    "the kernels and the baselines: sojourn-eval turnaround --swf FILE\n"
    "(docs/EVALUATION-turnaround.md \"Backtesting a cluster's own jobs\").\n"
    "\n"
    "Times are whole seconds after the header's UnixStartTime (the first submit); the job\n"
    "number is the job's id; the status is 1 (cancelled jobs are not kept); fields 5 and 8\n"
    "are the job's procs (one task per node); field 6 is the CPU seconds per task the job\n"
    "reported (-1 unknown). Memory, partition, preceding job and think time are not\n"
    "recorded (-1). SWF has no field for the CPU ratio a job declared or the scheduling\n"
    "policy it ran under: a backtest takes them from its own options. Progress and a summary\n"
    "on stderr. Exits 2 when FILE cannot be created or the predictor keeps no job history\n"
    "(--histdb_path=), 1 when the predictor cannot be reached or holds no job to write; FILE\n"
    "is then not written, nor when Ctrl-C or TERM stops the export.\n"
    "\n"
    "options:\n"
    "  --since DURATION       only the jobs submitted in the last DURATION (30d, 12h, ...;\n"
    "                         default: every job). A history loaded from an SWF log\n"
    "                         (sojourn-eval turnaround --histdb) keeps the log's own times\n"
    "  --nodes N              the cluster's size for the header's MaxNodes and MaxProcs, an\n"
    "                         integer in [1, 1000000] (default: the largest cluster a job of\n"
    "                         the history started on, as the predictor recorded it; histories\n"
    "                         written before sojourn recorded it have none, and the log then\n"
    "                         has no MaxNodes: sojourn-eval turnaround sizes the cluster by the\n"
    "                         largest job)\n"
    "  --out FILE             write to FILE instead of standard output (a name ending in .gz\n"
    "                         is gzip-compressed); it is written as FILE.tmp and renamed once\n"
    "                         complete\n";

const char kImportJobsHelp[] =
    "usage: sojourn import-jobs --swf FILE [--policy easy|fcfs] [--nsp normal|uniform]\n"
    "\n"
    "Adds the jobs of a log in the Standard Workload Format (a batch system's accounting\n"
    "converted to SWF, an archive's log, or one `sojourn export-jobs` wrote) to the\n"
    "predictor's job history, so that the turnaround kernels learn from them at once\n"
    "(ImportJobHistory). The log is first replayed as `sojourn-eval turnaround --swf FILE`\n"
    "replays it, to rebuild what a record holds beyond the log's fields: the queue ahead of\n"
    "each job at submit and at start, the tasks sharing its nodes (a job takes the lowest\n"
    "free ones) and the cluster's size (MaxProcs, else MaxNodes, else, with a warning, the\n"
    "largest job: add '; MaxNodes: N' to a log cut without its header). A job\n"
    "without both a wait and a run time (cancelled, never known to run) is left out. A\n"
    "malformed line, or a job the predictor would refuse (a requested time above a year, an\n"
    "id above 2^31 - 1), stops the import before anything is sent (FILE:LINE: and the\n"
    "reason). Times are the header's UnixStartTime plus the log's (without it, the log's\n"
    "own); a log that would end after now is refused.\n"
    "\n"
    "The records go in batches of 10,000, in the order the jobs finished, each recorded whole\n"
    "or not at all. The kernels take a template's last 500 recorded jobs as its newest, so\n"
    "import a log before the live jobs come (or one newer than them). Each batch is named by\n"
    "a hash of its lines of the log, UnixStartTime and the policy (and the size taken, for a\n"
    "log without one), and the history keeps\n"
    "the name: importing the same log again with the same options adds nothing, and an\n"
    "import cut short is finished by running it again (a log that has grown since is another\n"
    "import, whose later batches would be recorded again: import only the jobs added).\n"
    "Exits 2 for a bad log, a job the predictor refuses (named with its line) or a predictor\n"
    "without job history (--histdb_path=); 1 when the predictor cannot be reached or has no\n"
    "ImportJobHistory (an older build). Progress and a summary go to stderr; with --json,\n"
    "also {jobs_in_log, jobs_finished, imported, already_imported, history_records} to\n"
    "stdout.\n"
    "\n"
    "options:\n"
    "  --swf FILE             the log (.gz and .xz are read too); required\n"
    "  --policy P             the site's job selection, easy (EASY backfilling) or fcfs, kept\n"
    "                         in every record (default easy, as sojourn-eval turnaround)\n"
    "  --nsp P                the site's node selection, normal or uniform (default normal)\n";

const char kTurnaroundHelp[] =
    "usage: sojourn turnaround --procs N (--nodes N | --snapshot FILE | --queue) [options]\n"
    "\n"
    "When a parallel job submitted now would start and end: the predictor's three kernels\n"
    "(historical, simulation and hybrid; CISNE, paper 002), each with the wait, the run time\n"
    "and the turnaround, a point and an interval. The historical kernel learns from the\n"
    "finished jobs in the predictor's job history (`sojourn job-event`); the simulation\n"
    "kernel runs the job through the given cluster and queue. A predictor started with an\n"
    "empty --histdb_path= keeps no job history and refuses ('no job history configured').\n"
    "\n"
    "options:\n"
    "  --procs N              processors the job needs (one task per node), an integer in\n"
    "                         [1, 1000000] (required)\n"
    "  --requested DURATION   run time requested from the scheduler: 2h, 90m, 45s, 1h30m or\n"
    "                         seconds (default: unknown)\n"
    "  --user U               the job's user, group, executable and SWF queue as integer ids,\n"
    "  --group G              as in the Standard Workload Format; the historical kernel\n"
    "  --executable E         matches earlier jobs on them. Integers >= -1\n"
    "  --swf-queue Q          (default -1 = unknown)\n"
    "  --cpu FRACTION         share of a CPU each task uses, in (0, 1] (default: unknown)\n"
    "  --job-id ID            the job's id, an integer >= 0 (default 0)\n"
    "  --nodes N              the cluster: N nodes, nothing running or waiting, FCFS, normal\n"
    "                         node selection, one task per node; the job is submitted now\n"
    "  --snapshot FILE        the cluster: a ClusterSnapshot as JSON (proto field names), or -\n"
    "                         for standard input; the job is submitted at its\n"
    "                         now_unix_seconds. Example, 2 nodes, one running job, one\n"
    "                         waiting:\n"
    "                           {\"now_unix_seconds\": 1700000000,\n"
    "                            \"policy\": {\"job_selection\": \"JOB_SELECTION_EASY\"},\n"
    "                            \"nodes\": [{}, {\"local_cpu_ratio\": 0.5, \"local_tasks\": 1}],\n"
    "                            \"running\": [{\"spec\": {\"job_id\": 1, \"procs\": 1,\n"
    "                              \"submit_unix_seconds\": 1699990000, \"requested_seconds\": "
    "7200},\n"
    "                              \"start_unix_seconds\": 1699996400, \"nodes\": [0]}],\n"
    "                            \"waiting\": [{\"job_id\": 2, \"procs\": 2,\n"
    "                              \"submit_unix_seconds\": 1699999000}]}\n"
    "  --queue                the cluster as the broker knows it (`sojourn jobs`): its live\n"
    "                         hosts with their owners' load, and the jobs in its queue; the\n"
    "                         broker asks the predictor (a queued job of the same --job-id\n"
    "                         is left out of the queue; still waiting, it is estimated as\n"
    "                         submitted when it was, and the estimate is scored when it\n"
    "                         finishes: sojourn_predictor_turnaround_* on /metrics)\n";

const char kJobEventHelp[] =
    "usage: sojourn job-event [--file FILE] [options]\n"
    "\n"
    "Records job events in the predictor's job history, which the turnaround kernels learn\n"
    "from (it survives a predictor restart). One JobEvent per line, as JSON with the proto\n"
    "field names; blank lines and lines starting with # are skipped. A submitted or started\n"
    "event carries the cluster as it was then (see `sojourn turnaround --help`):\n"
    "  {\"submitted\": {\"job\": {\"job_id\": 7, \"submit_unix_seconds\": 1700000000, \"procs\": 2,\n"
    "     \"user\": 3, \"executable\": 12, \"requested_seconds\": 3600},\n"
    "     \"snapshot\": {\"now_unix_seconds\": 1700000000, \"nodes\": [{}, {}]}}}\n"
    "  {\"started\": {\"job_id\": 7, \"start_unix_seconds\": 1700000060, \"nodes\": [0, 1],\n"
    "     \"snapshot\": {\"now_unix_seconds\": 1700000060, \"nodes\": [{}, {}]}}}\n"
    "  {\"finished\": {\"job_id\": 7, \"finish_unix_seconds\": 1700003000}}\n"
    "  {\"submitted\": {\"job\": {\"job_id\": 8, \"submit_unix_seconds\": 1700003100, \"procs\": 1},\n"
    "     \"snapshot\": {\"now_unix_seconds\": 1700003100, \"nodes\": [{}, {}]}}}\n"
    "  {\"cancelled\": {\"job_id\": 8}}\n"
    "(each on one line). Stops at the first line that is not such an event, or that the\n"
    "predictor refuses, naming the line (exit 2); the events before it stay recorded.\n"
    "Prints how many events were recorded and how many records the history holds.\n"
    "\n"
    "options:\n"
    "  --file FILE            the events (default - = standard input)\n";

const char kJobsHelp[] =
    "usage: sojourn jobs [list | submit | start | finish | cancel] [options]\n"
    "\n"
    "The broker's queue of guest jobs. Middleware reports its jobs to the broker by host\n"
    "name (gRPC SubmitJob, StartJob, FinishJob); the broker keeps the queue (on disk with\n"
    "its --data_dir), forwards each event to the predictor's job history with the cluster\n"
    "as it was, and answers `sojourn turnaround --queue` on it. Times are now.\n"
    "\n"
    "  list (default)         the waiting jobs in queue order, then the running jobs;\n"
    "                         state 'overdue': running past its start plus its requested\n"
    "                         time (its finish was most likely lost: report it or cancel)\n"
    "  submit --job-id N --procs N [--requested DURATION] [--user U] [--group G]\n"
    "         [--executable E] [--swf-queue Q] [--cpu FRACTION]\n"
    "                         queue a job that needs N hosts (one task per host)\n"
    "  start --job-id N --hosts H1,H2,...\n"
    "                         the job started on these registered hosts (procs of them)\n"
    "  finish --job-id N [--cpu-seconds S]\n"
    "                         the job ended; S = CPU seconds each task used (default unknown)\n"
    "  cancel --job-id N      the job left the queue without finishing (waiting or killed)\n"
    "\n"
    "submit's job: --job-id an integer >= 1 (required), --procs an integer in [1, 100000]\n"
    "(required), --requested DURATION the run time asked of the scheduler (2h, 90m, 45s,\n"
    "1h30m or seconds; default unknown), --user, --group, --executable and --swf-queue the\n"
    "job's integer ids as in the Standard Workload Format, which the turnaround kernels\n"
    "match earlier jobs on (integers >= -1, default -1 = unknown), --cpu FRACTION the share\n"
    "of a CPU each task uses, in (0, 1] (default unknown).\n"
    "\n"
    "Each event prints whether the predictor's job history recorded it; the queue changes\n"
    "either way (the broker logs why the history did not). An event the history could not\n"
    "take because the predictor was unreachable waits in the broker's outbox and is sent\n"
    "again, in order, once it answers (broker --history_retry_seconds).\n"
    "\n"
    "options:\n";

// The help of a command: its own text, the address it uses, the common options.
std::string CommandHelp(const char* text, const char* address_help) {
  return std::string(text) + address_help + kCommonHelp;
}

using Args = sojourn::CommandLine;

// The credentials of every channel a command opens (common/tls.h), set by
// Parse from --tls-ca / --tls-cert / --tls-key or their environment
// variables; plaintext without them.
std::shared_ptr<grpc::ChannelCredentials> g_credentials;
bool g_client_cert = false;  // --tls-cert given

std::shared_ptr<grpc::ChannelCredentials> Credentials() {
  return sojourn::OrInsecure(g_credentials);
}

// --KEY, else the environment variable ENV, else "".
std::string TlsPath(const Args& a, const std::string& key, const char* env) {
  if (a.Has(key)) return a.Get(key);
  const char* e = std::getenv(env);
  return e == nullptr ? "" : e;
}

Args Parse(int argc, char** argv, const std::string& help,
           const std::vector<std::string>& with_value, const std::vector<std::string>& flags) {
  Args a = sojourn::ParseCommandLine(argc, argv, kProgram, help, with_value, flags);
  sojourn::TlsFiles files;
  files.flag_prefix = "--tls-";
  files.ca = TlsPath(a, "tls-ca", "SOJOURN_TLS_CA");
  files.cert = TlsPath(a, "tls-cert", "SOJOURN_TLS_CERT");
  files.key = TlsPath(a, "tls-key", "SOJOURN_TLS_KEY");
  absl::StatusOr<sojourn::TlsMaterial> tls =
      sojourn::LoadTls(files, sojourn::TlsRole::kClient, absl::Now());
  if (!tls.ok()) sojourn::DieUsage(kProgram, tls.status().message());
  if (tls->enabled) g_credentials = sojourn::ChannelCredentialsFor(*tls);
  g_client_cert = !tls->cert_pem.empty();
  return a;
}

// A service address given by the user (`field` names where), checked by
// sojourn::ValidateDialAddress. Exits 2 naming `field` otherwise.
void CheckAddress(absl::string_view v, const std::string& field) {
  if (absl::Status st = sojourn::ValidateDialAddress(v, field); !st.ok()) {
    sojourn::DieUsage(kProgram, st.message());
  }
}

// --KEY, else the environment variable ENV, else DEF; checked by CheckAddress.
std::string Address(const Args& a, const std::string& key, const char* env, const char* def) {
  if (a.Has(key)) {
    CheckAddress(a.Get(key), "--" + key);
    return a.Get(key);
  }
  const char* e = std::getenv(env);
  if (e == nullptr || *e == '\0') return def;
  CheckAddress(e, env);
  return e;
}

std::string BrokerAddress(const Args& a) {
  return Address(a, "broker", "SOJOURN_BROKER", "127.0.0.1:7401");
}
std::string PredictorAddress(const Args& a) {
  return Address(a, "predictor", "SOJOURN_PREDICTOR", "127.0.0.1:7402");
}

const char* CodeName(grpc::StatusCode code) {
  switch (code) {
    case grpc::StatusCode::OK: return "OK";
    case grpc::StatusCode::CANCELLED: return "CANCELLED";
    case grpc::StatusCode::UNKNOWN: return "UNKNOWN";
    case grpc::StatusCode::INVALID_ARGUMENT: return "INVALID_ARGUMENT";
    case grpc::StatusCode::DEADLINE_EXCEEDED: return "DEADLINE_EXCEEDED";
    case grpc::StatusCode::NOT_FOUND: return "NOT_FOUND";
    case grpc::StatusCode::ALREADY_EXISTS: return "ALREADY_EXISTS";
    case grpc::StatusCode::PERMISSION_DENIED: return "PERMISSION_DENIED";
    case grpc::StatusCode::RESOURCE_EXHAUSTED: return "RESOURCE_EXHAUSTED";
    case grpc::StatusCode::FAILED_PRECONDITION: return "FAILED_PRECONDITION";
    case grpc::StatusCode::ABORTED: return "ABORTED";
    case grpc::StatusCode::OUT_OF_RANGE: return "OUT_OF_RANGE";
    case grpc::StatusCode::UNIMPLEMENTED: return "UNIMPLEMENTED";
    case grpc::StatusCode::INTERNAL: return "INTERNAL";
    case grpc::StatusCode::UNAVAILABLE: return "UNAVAILABLE";
    case grpc::StatusCode::DATA_LOSS: return "DATA_LOSS";
    case grpc::StatusCode::UNAUTHENTICATED: return "UNAUTHENTICATED";
    default: return "unknown status code";
  }
}

// After gRPC's message of a failed connection, what to check when it looks
// like TLS on one end only or a certificate the other end refuses; "" else.
std::string TlsHint(const grpc::Status& s) {
  const std::string& m = s.error_message();
  if (absl::StrContains(m, "certificate verify failed")) {
    return " (is the service's certificate signed by --tls-ca, and made for a service, not with "
           "make-certs --client?)";
  }
  if (absl::StrContains(m, "is not in peer certificate")) {
    return " (the service's certificate does not name the address dialled: dial a name it "
           "holds, or give the service a certificate for this one)";
  }
  if (absl::StrContains(m, "wrong version number") ||
      (g_credentials != nullptr && absl::StrContains(m, "Ssl handshake failed"))) {
    return " (does the service use TLS? without --tls-ca the call is plaintext)";
  }
  if (absl::StrContains(m, "unknown ca") || absl::StrContains(m, "bad certificate")) {
    return " (the service refused --tls-cert: is it signed by the CA the service trusts?)";
  }
  if (s.error_code() == grpc::StatusCode::UNAVAILABLE && absl::StrContains(m, "Socket closed")) {
    if (g_credentials == nullptr) return " (if the service uses TLS, give --tls-ca)";
    if (!g_client_cert) {
      return " (if the service requires a client certificate, give --tls-cert and --tls-key)";
    }
    return " (if the service refused --tls-cert: is it signed by the CA the service trusts?)";
  }
  return "";
}

// Prints "sojourn: WHAT: MESSAGE" and returns the exit code for `s`. An empty
// message (e.g. UNIMPLEMENTED from a server that is not a `service`) is
// replaced by the status code's name, with a hint for UNIMPLEMENTED, and a
// failed connection gets TlsHint's.
int Fail(const grpc::Status& s, const std::string& what, const char* service,
         const std::string& address) {
  std::string message = s.error_message();
  if (message.empty()) message = CodeName(s.error_code());
  message += TlsHint(s);
  if (s.error_code() == grpc::StatusCode::UNIMPLEMENTED) {
    message = absl::StrCat(message, " (is ", address, " a ", service, "?)");
  }
  std::fprintf(stderr, "%s: %s: %s\n", kProgram, what.c_str(), message.c_str());
  switch (s.error_code()) {
    case grpc::StatusCode::INVALID_ARGUMENT:
    case grpc::StatusCode::NOT_FOUND:
    case grpc::StatusCode::ALREADY_EXISTS:
    case grpc::StatusCode::FAILED_PRECONDITION:
    case grpc::StatusCode::OUT_OF_RANGE:
      return sojourn::kExitUsage;
    default:
      return 1;
  }
}

// `m` as JSON with the proto field names and every field; indented over
// several lines, or on one line (a stream of answers, one per line).
std::string ToJson(const google::protobuf::Message& m, bool indented) {
  std::string out;
  google::protobuf::util::JsonPrintOptions opt;
  opt.add_whitespace = indented;
  opt.preserve_proto_field_names = true;
  opt.always_print_primitive_fields = true;
  (void)google::protobuf::util::MessageToJsonString(m, &out, opt);
  return out;
}

void PrintJson(const google::protobuf::Message& m) { std::fputs(ToJson(m, true).c_str(), stdout); }

std::string StateShort(sojourn::v1::HostState s) {
  int v = static_cast<int>(s);
  return v >= 1 && v <= 5 ? absl::StrCat("S", v) : "-";
}

std::string Hours(double seconds) { return absl::StrFormat("%.2fh", seconds / 3600.0); }

std::chrono::system_clock::time_point Deadline(const Args& a) {
  double t = 30;
  if (a.Has("timeout")) {
    // NaN fails both comparisons; a day is far beyond any single call.
    if (!absl::SimpleAtod(a.Get("timeout"), &t) || !(t > 0 && t <= 86400)) {
      sojourn::DieUsage(kProgram, absl::StrCat("--timeout must be a number of seconds in (0, 86400], got '",
                                               sojourn::Excerpt(a.Get("timeout")), "'"));
    }
  }
  return std::chrono::system_clock::now() +
         std::chrono::milliseconds(static_cast<int64_t>(t * 1000));
}

// The value of a required option.
std::string Required(const Args& a, const std::string& key) {
  if (!a.Has(key)) sojourn::DieUsage(kProgram, "--" + key + " is required");
  return a.Get(key);
}

// A host name as the services accept it for lookups (and valid UTF-8, which a
// proto3 string field must be); exits 2 otherwise.
std::string HostArg(absl::string_view host, const std::string& flag) {
  absl::Status st = sojourn::ValidateLookupName(host, flag);
  if (st.ok() && !sojourn::IsValidUtf8(host)) {
    st = absl::InvalidArgumentError(
        absl::StrCat(flag, " '", sojourn::Excerpt(host), "' is not valid UTF-8"));
  }
  if (!st.ok()) sojourn::DieUsage(kProgram, st.message());
  return std::string(host);
}

absl::Duration DurationArg(const Args& a, const std::string& key) {
  auto d = sojourn::ParsePositiveDuration(Required(a, key));
  if (!d.ok()) sojourn::DieUsage(kProgram, absl::StrCat("--", key, ": ", d.status().message()));
  // The services take whole seconds: 0.5s became 0 (then refused by the
  // service as "must be > 0") and 90.7s became 90.
  if (absl::Trunc(*d, absl::Seconds(1)) != *d) {
    sojourn::DieUsage(kProgram, absl::StrCat("--", key, ": '", sojourn::Excerpt(a.Get(key)),
                                             "' is not a whole number of seconds"));
  }
  return *d;
}

// A moment: "+DURATION" after `now`, an RFC 3339 date-time with its UTC
// offset (seconds optional) or Unix seconds (> 0). A date-time without an
// offset is refused rather than guessed in some zone.
int64_t StartArg(const Args& a, const std::string& key, absl::Time now) {
  const std::string v = a.Get(key);
  auto die = [&](const std::string& why) {
    sojourn::DieUsage(kProgram, absl::StrCat("--", key, ": '", sojourn::Excerpt(v), "' ", why));
  };
  if (absl::StartsWith(v, "+")) {
    auto d = sojourn::ParsePositiveDuration(v.substr(1));
    if (!d.ok()) die(absl::StrCat("is not +DURATION: ", d.status().message()));
    if (absl::Trunc(*d, absl::Seconds(1)) != *d) die("is not a whole number of seconds");
    return absl::ToUnixSeconds(now + *d);
  }
  int64_t unix_seconds = 0;
  if (absl::SimpleAtoi(v, &unix_seconds)) {
    if (unix_seconds <= 0) die("must be a Unix time after 1970-01-01");
    return unix_seconds;
  }
  absl::Time t;
  std::string err;
  for (const char* format : {"%Y-%m-%d%ET%H:%M:%E*S%Ez", "%Y-%m-%d%ET%H:%M%Ez"}) {
    if (absl::ParseTime(format, v, &t, &err)) {
      // 0 would mean "now".
      if (absl::ToUnixSeconds(t) <= 0) die("must be after 1970-01-01");
      return absl::ToUnixSeconds(t);
    }
  }
  die("is not +DURATION, Unix seconds or a date-time with its UTC offset "
      "(2026-12-09T09:00+01:00, 2026-12-09T08:00Z)");
  return 0;
}

double NumberArg(const Args& a, const std::string& key, double def) {
  if (!a.Has(key)) return def;
  double v = 0;
  if (!absl::SimpleAtod(a.Get(key), &v) || !(v >= 0) || !std::isfinite(v)) {
    sojourn::DieUsage(kProgram, "--" + key + " must be a finite number >= 0, got '" +
                                    sojourn::Excerpt(a.Get(key)) + "'");
  }
  return v;
}

std::vector<std::string> With(std::vector<std::string> s) {
  for (const char* common : {"broker", "predictor", "timeout", "tls-ca", "tls-cert", "tls-key"}) {
    s.push_back(common);
  }
  return s;
}

// The broker's ListHosts. On failure prints why ("WHAT: reason") and returns
// the exit code; 0 on success.
int ListBrokerHosts(const Args& a, const std::string& what,
                    sojourn::v1::BrokerListHostsResponse* resp) {
  const std::string broker = BrokerAddress(a);
  grpc::ChannelArguments channel_args;
  channel_args.SetMaxReceiveMessageSize(256 << 20);  // as rank: many thousands of hosts
  auto stub =
      sojourn::v1::Broker::NewStub(grpc::CreateCustomChannel(broker, Credentials(), channel_args));
  grpc::ClientContext ctx;
  ctx.set_deadline(Deadline(a));
  grpc::Status s = stub->ListHosts(&ctx, {}, resp);
  return s.ok() ? 0 : Fail(s, what, "broker", broker);
}

int Hosts(int argc, char** argv) {
  Args a = Parse(argc, argv, CommandHelp(kHostsHelp, kBrokerHelp), With({}), {"json"});
  sojourn::v1::BrokerListHostsResponse resp;
  if (int code = ListBrokerHosts(a, "listing hosts", &resp); code != 0) return code;
  if (a.Flag("json")) {
    PrintJson(resp);
    return 0;
  }
  std::printf("%-24s %-6s %-22s %6s %10s %9s  %-5s %-23s  %s\n", "HOST", "LIVE", "STATEMGR",
              "CORES", "MEM_MB", "MHZ", "STATE", "STATE_SINCE", "LAST_HEARTBEAT");
  auto utc = [](int64_t t) {
    return absl::FormatTime("%Y-%m-%d %H:%M:%S UTC", absl::FromUnixSeconds(t), absl::UTCTimeZone());
  };
  for (const auto& h : resp.hosts()) {
    // The state at the host's last heartbeat (state managers before it was
    // reported send none: "-").
    const bool cond = h.has_condition();
    std::printf("%-24s %-6s %-22s %6d %10.0f %9.0f  %-5s %-23s  %s\n", h.host().c_str(),
                h.live() ? "yes" : "no", h.statemgr_address().c_str(), h.attributes().cpu_cores(),
                h.attributes().total_mem_mb(), h.attributes().cpu_mhz(),
                cond ? StateShort(h.condition().state()).c_str() : "-",
                cond ? utc(h.condition().state_since_unix_seconds()).c_str() : "-",
                utc(h.last_heartbeat_unix_seconds()).c_str());
  }
  return 0;
}

int Guest(int argc, char** argv) {
  Args a = Parse(argc, argv, CommandHelp(kGuestHelp, ""), With({"pid", "monitor"}),
                 {"json", "unregister"});
  const std::string monitor = Address(a, "monitor", "SOJOURN_MONITOR", "127.0.0.1:7405");
  if (a.Flag("unregister") && !a.Has("pid")) sojourn::DieUsage(kProgram, "--unregister needs --pid");
  auto stub = sojourn::v1::Monitor::NewStub(grpc::CreateChannel(monitor, Credentials()));
  if (a.Has("pid")) {
    const int pid = static_cast<int>(a.GetIntInRange("pid", 0, 1, 4194304));
    grpc::ClientContext ctx;
    ctx.set_deadline(Deadline(a));
    grpc::Status s;
    if (a.Flag("unregister")) {
      sojourn::v1::UnregisterGuestRequest req;
      req.set_pid(pid);
      sojourn::v1::UnregisterGuestResponse resp;
      s = stub->UnregisterGuest(&ctx, req, &resp);
    } else {
      sojourn::v1::RegisterGuestRequest req;
      req.set_pid(pid);
      sojourn::v1::RegisterGuestResponse resp;
      s = stub->RegisterGuest(&ctx, req, &resp);
    }
    if (!s.ok()) {
      return Fail(s, absl::StrCat(a.Flag("unregister") ? "unregistering" : "registering",
                                  " guest ", pid),
                  "monitor", monitor);
    }
  }
  grpc::ClientContext ctx;
  ctx.set_deadline(Deadline(a));
  sojourn::v1::GetMonitorStatusResponse resp;
  grpc::Status s = stub->GetStatus(&ctx, {}, &resp);
  if (!s.ok()) return Fail(s, "reading the monitor's status", "monitor", monitor);
  if (a.Flag("json")) {
    PrintJson(resp);
    return 0;
  }
  std::string pids;
  for (int p : resp.guest_pids()) absl::StrAppend(&pids, pids.empty() ? "" : ",", p);
  std::printf("monitor of %s: guests %s; gateway %s\n", resp.host().c_str(),
              pids.empty() ? "none" : pids.c_str(),
              resp.gateway().empty() ? "off" : resp.gateway().c_str());
  return 0;
}

int Availability(int argc, char** argv) {
  Args a = Parse(argc, argv, CommandHelp(kAvailabilityHelp, kPredictorHelp),
                 With({"host", "window", "start", "history-days", "curve", "statemgr"}),
                 {"json", "baselines"});
  sojourn::v1::PredictAvailabilityRequest req;
  req.set_host(HostArg(Required(a, "host"), "--host"));
  req.set_window_seconds(absl::ToInt64Seconds(DurationArg(a, "window")));
  if (a.Has("start")) req.set_start_unix_seconds(StartArg(a, "start", absl::Now()));
  if (a.Has("statemgr")) req.set_statemgr_address(a.Get("statemgr"));
  // Whole numbers only: 2.5 days used to be truncated to 2 without a word,
  // 1e12 points converted to int out of range.
  req.set_history_days(static_cast<int>(a.GetIntInRange("history-days", 0, 0, 36500)));
  req.set_curve_points(static_cast<int>(a.GetIntInRange("curve", 0, 0, 100000)));
  req.set_deployed_estimates(a.Flag("baselines"));
  const std::string predictor = PredictorAddress(a);
  auto stub = sojourn::v1::Predictor::NewStub(grpc::CreateChannel(predictor, Credentials()));
  grpc::ClientContext ctx;
  ctx.set_deadline(Deadline(a));
  sojourn::v1::PredictAvailabilityResponse resp;
  grpc::Status s = stub->PredictAvailability(&ctx, req, &resp);
  if (!s.ok()) {
    return Fail(s, "predicting availability of " + sojourn::Excerpt(req.host()), "predictor",
                predictor);
  }
  if (a.Flag("json")) {
    PrintJson(resp);
    return 0;
  }
  std::printf("host %s: TR over %s = %.4f, MTTF %s (restricted to the window)\n",
              resp.host().c_str(), Hours(req.window_seconds()).c_str(), resp.tr_ratio(),
              Hours(resp.mttf_seconds()).c_str());
  if (req.start_unix_seconds() > 0) {
    std::printf("window from %s\n",
                absl::FormatTime("%Y-%m-%d %H:%M:%S UTC",
                                 absl::FromUnixSeconds(req.start_unix_seconds()),
                                 absl::UTCTimeZone())
                    .c_str());
  }
  // A window from now or the future starts from the state now; one in the
  // past from the state at its start.
  std::printf("%s %s, %s, %d history windows%s, step %llds, method %s\n",
              req.start_unix_seconds() > 0 ? "initial state" : "state now",
              StateShort(resp.initial_state()).c_str(),
              resp.day_type() == sojourn::v1::DAY_TYPE_WEEKEND ? "weekend" : "weekday",
              resp.history_windows(), resp.low_history() ? " (LOW HISTORY)" : "",
              static_cast<long long>(resp.step_seconds()), resp.method().c_str());
  // The empirical baseline beside the model's TR.
  if (resp.past_up_windows() > 0) {
    std::printf("past windows like this one: %d of %d stayed up (%.4f)\n",
                resp.past_up_windows_survived(), resp.past_up_windows(),
                static_cast<double>(resp.past_up_windows_survived()) / resp.past_up_windows());
  } else {
    std::printf("past windows like this one: none yet\n");
  }
  if (resp.has_deployed_estimates()) {
    const sojourn::v1::DeployedEstimates& d = resp.deployed_estimates();
    std::printf("HTCondor AvailTime: TR %.4f (%lld past up intervals, up %s); BOINC on-fraction %.4f\n",
                d.avail_time_tr(), static_cast<long long>(d.completed_up_intervals()),
                Hours(d.up_seconds()).c_str(), d.on_fraction());
  }
  for (const auto& p : resp.curve()) {
    std::printf("  +%-8s TR %.4f\n", Hours(p.offset_seconds()).c_str(), p.tr_ratio());
  }
  return 0;
}

int Rank(int argc, char** argv) {
  Args a = Parse(argc, argv, CommandHelp(kRankHelp, kBrokerHelp),
                 With({"duration", "cpu", "memory-mb", "policy", "min-mhz", "hosts"}),
                 {"json", "include-busy"});
  sojourn::v1::RankHostsRequest req;
  req.set_include_busy_hosts(a.Flag("include-busy"));
  const absl::Duration duration = DurationArg(a, "duration");
  // The broker's limit (RankHosts refuses longer jobs); checked here so that a
  // typo fails at once, with or without a cluster to ask.
  if (duration > absl::Hours(7 * 24)) {
    sojourn::DieUsage(kProgram, "--duration must be at most 7 days, got '" +
                                    sojourn::Excerpt(a.Get("duration")) + "'");
  }
  req.mutable_job()->set_duration_seconds(absl::ToInt64Seconds(duration));
  // CPUs the job needs (cores): above 1 for a multi-core job, unlike the
  // free fraction of can-run / how-long. 0 would silently mean 1.0.
  const double cpus = NumberArg(a, "cpu", 1.0);
  if (!(cpus > 0)) {
    sojourn::DieUsage(kProgram, "--cpu is the number of CPUs (cores) the job needs, > 0, got '" +
                                    sojourn::Excerpt(a.Get("cpu")) + "'");
  }
  req.mutable_job()->set_cpu_share_ratio(cpus);
  req.mutable_job()->set_memory_mb(NumberArg(a, "memory-mb", 0));
  req.mutable_job()->set_min_cpu_mhz(NumberArg(a, "min-mhz", 0));
  if (a.Has("hosts")) {
    for (absl::string_view h : absl::StrSplit(a.Get("hosts"), ',', absl::SkipEmpty())) {
      req.mutable_job()->add_only_hosts(std::string(HostArg(h, "--hosts")));
    }
    // An empty list would mean "every host" to the broker: not what was asked.
    if (req.job().only_hosts().empty()) {
      sojourn::DieUsage(kProgram, "--hosts lists no host (give comma-separated names)");
    }
  }
  if (a.Has("policy")) {
    const std::string& policy = a.Get("policy");
    // The broker's policies (omniscient exists in simulation only).
    if (policy != "proactive" && policy != "condor" && policy != "round_robin" && policy != "tr") {
      sojourn::DieUsage(kProgram, "--policy must be proactive, condor, round_robin or tr, got '" +
                                      sojourn::Excerpt(policy) + "'");
    }
    req.set_policy(policy);
  }
  grpc::ChannelArguments channel_args;
  channel_args.SetMaxReceiveMessageSize(256 << 20);  // rankings of many thousands of hosts
  const std::string broker = BrokerAddress(a);
  auto stub =
      sojourn::v1::Broker::NewStub(grpc::CreateCustomChannel(broker, Credentials(), channel_args));
  grpc::ClientContext ctx;
  ctx.set_deadline(Deadline(a));
  sojourn::v1::RankHostsResponse resp;
  grpc::Status s = stub->RankHosts(&ctx, req, &resp);
  if (!s.ok()) return Fail(s, "ranking hosts", "broker", broker);
  if (a.Flag("json")) {
    PrintJson(resp);
    return 0;
  }
  auto opt_hours = [](bool has, double seconds) { return has ? Hours(seconds) : std::string("-"); };
  int usable = 0;
  for (const auto& h : resp.hosts()) usable += h.eligible();
  std::printf("policy %s%s, job %s, %.2f CPU, %.0f MiB; TR horizon %s; %d of %d hosts can run it\n",
              resp.policy().c_str(), resp.rule().empty() ? "" : (" (rule " + resp.rule() + ")").c_str(),
              Hours(req.job().duration_seconds()).c_str(), req.job().cpu_share_ratio(),
              req.job().memory_mb(), Hours(resp.horizon_seconds()).c_str(), usable,
              resp.hosts_size());
  std::printf("%4s  %-24s %6s %5s %7s %8s %8s %8s %8s %5s %5s  %s\n", "RANK", "HOST", "CR",
              "LOAD", "TR", "MTTF", "JCT", "JCTF", "ETL", "STATE", "HIST", "REASON");
  for (const auto& h : resp.hosts()) {
    std::printf(
        "%4s  %-24s %6.2f %5s %7s %8s %8s %8s %8s %5s %5s  %s\n",
        h.rank() > 0 ? absl::StrCat(h.rank()).c_str() : "-", h.host().c_str(),
        h.relative_speed_ratio(),
        h.has_predicted_load_ratio() ? absl::StrFormat("%.2f", h.predicted_load_ratio()).c_str()
                                     : "-",
        h.has_tr_ratio() ? absl::StrFormat("%.4f", h.tr_ratio()).c_str() : "-",
        opt_hours(h.has_mttf_seconds(), h.mttf_seconds()).c_str(),
        opt_hours(h.has_jct_seconds(), h.jct_seconds()).c_str(),
        opt_hours(h.has_jctf_seconds(), h.jctf_seconds()).c_str(),
        opt_hours(h.has_etl_seconds(), h.etl_seconds()).c_str(),
        StateShort(h.current_state()).c_str(),
        h.has_tr_ratio() ? absl::StrCat(h.history_windows(), h.low_history() ? "*" : "").c_str()
                         : "-",
        h.reason().c_str());
  }
  std::printf(
      "(CR = clock rate relative to the usable hosts' median; LOAD = predicted CPU load over the job; TR over "
      "the job's duration; MTTF = integral of TR over the horizon; JCT = run time without failures; "
      "JCTF = expected completion with failures (eq. 7); ETL = work done before an expected "
      "failure; HIST = training windows, * = low history)\n");
  if (usable == 0) std::printf("no host can run this job (reasons above)\n");
  return 0;
}

std::string MethodText(const sojourn::v1::UsageMethod& m) {
  std::string out = m.method();
  if (m.has_recent_error_ratio()) {
    out += absl::StrFormat(" (recent error %.3f over %d points)", m.recent_error_ratio(),
                           m.recent_points());
  }
  return out + ": " + m.why();
}

double HoursArg(const Args& a) {
  const std::string text = Required(a, "hours");
  double h = 0;
  if (!absl::SimpleAtod(text, &h) || !(h > 0) || h > 72) {
    sojourn::DieUsage(kProgram, "--hours must be a number in (0, 72], got '" + text + "'");
  }
  return h;
}

std::unique_ptr<sojourn::v1::Predictor::Stub> PredictorStub(const std::string& address) {
  return sojourn::v1::Predictor::NewStub(grpc::CreateChannel(address, Credentials()));
}

// can-run / how-long's --cpu: the fraction of the host's CPU that must stay free.
double FreeCpuArg(const Args& a) {
  const double v = NumberArg(a, "cpu", 0);
  if (v > 1) {
    sojourn::DieUsage(kProgram,
                      "--cpu is the fraction of the host's CPU that must stay free, in [0, 1], "
                      "got '" + sojourn::Excerpt(a.Get("cpu")) + "'");
  }
  return v;
}

// can-run / how-long's --memory-mb, after --cpu: at least one of them must
// ask for something (0 = not checked; with neither the answer would be a
// trivial yes / 72 h).
double FreeMemoryArg(const Args& a, double free_cpu) {
  const double mb = NumberArg(a, "memory-mb", 0);
  if (free_cpu == 0 && mb == 0) {
    sojourn::DieUsage(kProgram,
                      "nothing to check: give --cpu FREE or --memory-mb MB (both are 0, 'not "
                      "checked')");
  }
  return mb;
}

int Usage(int argc, char** argv) {
  Args a = Parse(argc, argv, CommandHelp(kUsageHelp, kPredictorHelp),
                 With({"host", "resource", "hours"}), {"json"});
  const std::string predictor = PredictorAddress(a);
  sojourn::v1::PredictUsageRequest req;
  req.set_host(HostArg(Required(a, "host"), "--host"));
  const std::string resource = absl::AsciiStrToLower(a.Get("resource", "cpu"));
  // The statemgr's names (models/usage ParseResource): cpu, or mem / memory / ram.
  if (resource != "cpu" && resource != "mem" && resource != "memory" && resource != "ram") {
    sojourn::DieUsage(kProgram, "--resource must be cpu or mem, got '" +
                                    sojourn::Excerpt(a.Get("resource")) + "'");
  }
  req.set_resource(resource);
  req.set_hours(HoursArg(a));
  grpc::ClientContext ctx;
  ctx.set_deadline(Deadline(a));
  sojourn::v1::PredictUsageResponse resp;
  grpc::Status s = PredictorStub(predictor)->PredictUsage(&ctx, req, &resp);
  if (!s.ok()) {
    return Fail(s, "predicting usage of " + sojourn::Excerpt(req.host()), "predictor", predictor);
  }
  if (a.Flag("json")) {
    PrintJson(resp);
    return 0;
  }
  std::printf("host %s, %s use for the next %.1fh, method %s\n", resp.host().c_str(),
              resp.resource().c_str(), req.hours(), MethodText(resp.method()).c_str());
  for (int i = 0; i < resp.use_ratio_size(); ++i) {
    if (i % 12 == 0) std::printf("%s  +%2dh", i ? "\n" : "", i / 12);
    std::printf(" %.2f", resp.use_ratio(i));
  }
  std::printf("\n");
  return 0;
}

int CanRun(int argc, char** argv) {
  Args a = Parse(argc, argv, CommandHelp(kCanRunHelp, kPredictorHelp),
                 With({"host", "cpu", "memory-mb", "hours"}), {"json"});
  const std::string predictor = PredictorAddress(a);
  sojourn::v1::CanRunRequest req;
  req.set_host(HostArg(Required(a, "host"), "--host"));
  req.set_free_cpu_ratio(FreeCpuArg(a));
  req.set_free_mem_mb(FreeMemoryArg(a, req.free_cpu_ratio()));
  req.set_hours(HoursArg(a));
  grpc::ClientContext ctx;
  ctx.set_deadline(Deadline(a));
  sojourn::v1::CanRunResponse resp;
  grpc::Status s = PredictorStub(predictor)->CanRun(&ctx, req, &resp);
  if (!s.ok()) {
    return Fail(s, "asking whether " + sojourn::Excerpt(req.host()) + " can run the job",
                "predictor", predictor);
  }
  if (a.Flag("json")) {
    PrintJson(resp);
    return 0;
  }
  std::printf("%s: %s\n  %s\n  method %s\n", req.host().c_str(), resp.can_run() ? "yes" : "no",
              resp.reason().c_str(), resp.method().c_str());
  return 0;
}

int HowLong(int argc, char** argv) {
  Args a = Parse(argc, argv, CommandHelp(kHowLongHelp, kPredictorHelp),
                 With({"host", "cpu", "memory-mb"}), {"json"});
  const std::string predictor = PredictorAddress(a);
  sojourn::v1::HowLongRequest req;
  req.set_host(HostArg(Required(a, "host"), "--host"));
  req.set_free_cpu_ratio(FreeCpuArg(a));
  req.set_free_mem_mb(FreeMemoryArg(a, req.free_cpu_ratio()));
  grpc::ClientContext ctx;
  ctx.set_deadline(Deadline(a));
  sojourn::v1::HowLongResponse resp;
  grpc::Status s = PredictorStub(predictor)->HowLong(&ctx, req, &resp);
  if (!s.ok()) {
    return Fail(s, "asking how long " + sojourn::Excerpt(req.host()) + " can run the job",
                "predictor", predictor);
  }
  if (a.Flag("json")) {
    PrintJson(resp);
    return 0;
  }
  std::printf("%s: %.2fh%s%s\n  method %s\n", req.host().c_str(), resp.hours(),
              resp.capped() ? " (the 72 h cap)" : "",
              resp.limited_by().empty() ? "" : (", limited by " + resp.limited_by()).c_str(),
              resp.method().c_str());
  return 0;
}

std::string PrintTime(int64_t unix_seconds) {
  return absl::FormatTime("%Y-%m-%d %H:%M:%S UTC", absl::FromUnixSeconds(unix_seconds),
                          absl::UTCTimeZone());
}

// The addresses --statemgr lists, each once (two streams from one state
// manager would print every change twice, two reads export a host twice);
// empty without --statemgr. Exits 2 for a bad address or an empty list.
std::vector<std::string> StatemgrArg(const Args& a) {
  std::vector<std::string> statemgrs;
  if (!a.Has("statemgr")) return statemgrs;
  for (absl::string_view v : absl::StrSplit(a.Get("statemgr"), ',', absl::SkipEmpty())) {
    CheckAddress(v, "--statemgr");
    if (std::find(statemgrs.begin(), statemgrs.end(), v) == statemgrs.end()) {
      statemgrs.emplace_back(v);
    }
  }
  if (statemgrs.empty()) sojourn::DieUsage(kProgram, "--statemgr needs an address");
  return statemgrs;
}

int Watch(int argc, char** argv) {
  Args a = Parse(argc, argv, CommandHelp(kWatchHelp, kBrokerHelp), With({"host", "statemgr"}),
                 {"json", "no-snapshot"});
  // A bad --timeout is refused even when no broker is asked. It bounds the
  // connection to each state manager (the stream itself has no deadline).
  const auto connect_deadline = Deadline(a);
  sojourn::v1::WatchStatesRequest req;
  if (a.Has("host")) {
    if (a.Get("host").empty()) {
      sojourn::DieUsage(kProgram, "--host needs a host name (leave it out to watch every host)");
    }
    req.set_host(HostArg(a.Get("host"), "--host"));
  }
  req.set_skip_snapshot(a.Flag("no-snapshot"));
  // A stream (a connection) per state manager, one per host in deploy/'s
  // layout: with the soft limit of 1024 open files Debian starts a shell
  // with, a watch over about 1,000 state managers failed ("Too many open
  // files"). Where the limit cannot be raised, the watch says so when a
  // connection fails.
  (void)sojourn::RaiseOpenFileLimit();
  std::vector<std::string> statemgrs = StatemgrArg(a);
  if (statemgrs.empty()) {
    const std::string broker = BrokerAddress(a);
    sojourn::v1::BrokerListHostsResponse resp;
    if (int code = ListBrokerHosts(a, "listing the state managers", &resp); code != 0) {
      return code;
    }
    for (const auto& h : resp.hosts()) {
      if (!req.host().empty() && h.host() != req.host()) continue;
      if (std::find(statemgrs.begin(), statemgrs.end(), h.statemgr_address()) == statemgrs.end()) {
        statemgrs.push_back(h.statemgr_address());
      }
    }
    if (statemgrs.empty() && !req.host().empty()) {
      std::fprintf(stderr,
                   "%s: host %s is not registered with the broker %s (give its state manager "
                   "with --statemgr ADDR to wait for it)\n",
                   kProgram, sojourn::Excerpt(req.host()).c_str(), broker.c_str());
      return sojourn::kExitUsage;
    }
    if (statemgrs.empty()) {
      std::fprintf(stderr, "%s: no state manager is registered with the broker %s\n", kProgram,
                   broker.c_str());
      return 1;
    }
  }
  const bool json = a.Flag("json");
  // A reader of stdout that goes away (`sojourn watch | head -1`) ends the
  // watch quietly (exit 0): a failed write (EPIPE instead of SIGPIPE), or,
  // while no change comes, poll() on stdout below.
  std::signal(SIGPIPE, SIG_IGN);
  std::mutex out_mu;
  int exit_code = 0;
  // The first stream to end (or stdout closing) ends the watch: the other
  // streams are cancelled, and only the first reason is reported.
  bool stopped = false;
  std::vector<std::unique_ptr<grpc::ClientContext>> contexts;
  for (size_t i = 0; i < statemgrs.size(); ++i) {
    contexts.push_back(std::make_unique<grpc::ClientContext>());
  }
  auto stop_locked = [&] {
    stopped = true;
    for (auto& c : contexts) c->TryCancel();
  };
  std::atomic<size_t> running{statemgrs.size()};
  std::vector<std::thread> threads;
  for (size_t i = 0; i < statemgrs.size(); ++i) {
    threads.emplace_back([&, i] {
      const std::string& address = statemgrs[i];
      grpc::ClientContext& ctx = *contexts[i];
      auto channel = grpc::CreateChannel(address, Credentials());
      // Connect first, within --timeout (a host that drops the packets would
      // keep the channel connecting for minutes), in slices so that a watch
      // already ended by another stream does not wait for this one. A refused
      // connection (TRANSIENT_FAILURE) goes on to the call, which fails at
      // once with gRPC's reason.
      for (;;) {
        const grpc_connectivity_state state = channel->GetState(/*try_to_connect=*/true);
        if (state == GRPC_CHANNEL_READY || state == GRPC_CHANNEL_TRANSIENT_FAILURE) break;
        const auto slice = std::min(connect_deadline, std::chrono::system_clock::now() +
                                                          std::chrono::milliseconds(200));
        if (channel->WaitForStateChange(state, slice)) continue;
        std::lock_guard<std::mutex> l(out_mu);
        if (stopped) {
          --running;
          return;
        }
        if (std::chrono::system_clock::now() >= connect_deadline) {
          std::fprintf(stderr, "%s: watching %s: cannot connect within --timeout (%s)\n", kProgram,
                       address.c_str(), a.Has("timeout") ? (a.Get("timeout") + " s").c_str() : "30 s");
          exit_code = 1;
          stop_locked();
          --running;
          return;
        }
      }
      auto stub = sojourn::v1::StateManager::NewStub(channel);
      auto reader = stub->WatchStates(&ctx, req);
      reader->WaitForInitialMetadata();
      // The state manager's sign that the watcher is registered (statemgr.proto, WatchStates).
      if (ctx.GetServerInitialMetadata().count("sojourn-watch-registered") > 0) {
        std::lock_guard<std::mutex> l(out_mu);
        if (!stopped) {
          std::fprintf(stderr, "%s: watching state changes at %s (Ctrl-C stops)\n", kProgram,
                       address.c_str());
        }
      }
      sojourn::v1::StateTransition t;
      while (reader->Read(&t)) {
        std::lock_guard<std::mutex> l(out_mu);
        if (stopped) break;
        if (json) {
          std::printf("%s\n", ToJson(t, /*indented=*/false).c_str());
        } else if (t.snapshot()) {
          std::printf("%s  %-20s %-8s     current state\n", PrintTime(t.since_unix_seconds()).c_str(),
                      t.host().c_str(), StateShort(t.to_state()).c_str());
        } else {
          std::printf("%s  %-20s %2s -> %-2s   %s\n", PrintTime(t.since_unix_seconds()).c_str(),
                      t.host().c_str(), StateShort(t.from_state()).c_str(),
                      StateShort(t.to_state()).c_str(), t.reason().c_str());
        }
        if (std::fflush(stdout) != 0) {
          // A reader that went away (EPIPE) ends the watch quietly; any other
          // failure (a full disk) is an error.
          if (errno != EPIPE) {
            std::fprintf(stderr, "%s: writing the output: %s\n", kProgram, std::strerror(errno));
            exit_code = 1;
          }
          stop_locked();
        }
      }
      grpc::Status s = reader->Finish();
      std::lock_guard<std::mutex> l(out_mu);
      if (!stopped) {
        // The stream only ends on an error (or the server's shutdown).
        const int code = s.ok() ? 1 : Fail(s, "watching " + address, "statemgr", address);
        if (s.ok()) std::fprintf(stderr, "%s: %s ended the stream\n", kProgram, address.c_str());
        exit_code = code;
        stop_locked();
      }
      --running;
    });
  }
  // Meanwhile, notice a reader of stdout that went away while nothing is
  // written (POLLERR on a pipe whose reading end is closed; a file or a
  // terminal never reports it).
  pollfd out{STDOUT_FILENO, 0, 0};
  while (running > 0) {
    if (poll(&out, 1, 200) > 0) {
      if (out.revents & (POLLERR | POLLHUP)) {
        std::lock_guard<std::mutex> l(out_mu);
        if (!stopped) stop_locked();
      }
      if (out.revents != 0) break;  // reported once (POLLNVAL: no stdout; writes tell)
    }
  }
  for (std::thread& t : threads) t.join();
  return exit_code;
}

// The temporary file of an export to a file, removed by the handler of
// SIGINT and SIGTERM (unlink and _exit are async-signal-safe).
char g_export_tmp[4096];

void RemoveExportTmpAndExit(int sig) {
  ::unlink(g_export_tmp);
  ::_exit(128 + sig);
}

// Sets (or, with `on` false, takes back) RemoveExportTmpAndExit for SIGINT and
// SIGTERM, except where the signal is ignored (a background job of a
// non-interactive shell ignores SIGINT: a Ctrl-C for another job is not
// this export's).
void HandleExportSignals(bool on) {
  for (int sig : {SIGINT, SIGTERM}) {
    struct sigaction old;
    if (::sigaction(sig, nullptr, &old) != 0 || old.sa_handler == SIG_IGN) continue;
    struct sigaction act {};
    act.sa_handler = on ? RemoveExportTmpAndExit : SIG_DFL;
    sigemptyset(&act.sa_mask);
    ::sigaction(sig, &act, nullptr);
  }
}

// --out FILE of the exports: "-" (standard output) unless given; exits 2 for
// an empty name.
std::string ExportOutArg(const Args& a) {
  const std::string out = a.Has("out") ? a.Get("out") : "-";
  if (out.empty()) sojourn::DieUsage(kProgram, "--out needs a file name (- = standard output)");
  return out;
}

// Before the writer creates OUT.tmp: Ctrl-C (or a TERM) half way then
// removes it. False (no handler) for standard output, or a name too long to
// keep in g_export_tmp.
bool RemoveExportTmpOnSignal(const std::string& out) {
  // OUT.tmp, or beside the file a link names; none for a device or FIFO.
  const std::string tmp = sojourn::OutputFile::TempPathFor(out);
  if (tmp.empty() || tmp.size() >= sizeof(g_export_tmp)) return false;
  std::memcpy(g_export_tmp, tmp.c_str(), tmp.size() + 1);
  HandleExportSignals(true);
  return true;
}

// Each host's samples are read from its state manager this many at a time
// (GetSeries pages of about 2 MB).
constexpr int kExportPageSamples = 50000;

int Export(int argc, char** argv) {
  Args a = Parse(argc, argv, CommandHelp(kExportHelp, kBrokerHelp),
                 With({"hosts", "statemgr", "since", "out"}), {"skip-unreadable"});
  std::vector<std::string> only;
  if (a.Has("hosts")) {
    for (absl::string_view h : absl::StrSplit(a.Get("hosts"), ',', absl::SkipEmpty())) {
      std::string host = HostArg(h, "--hosts");
      if (std::find(only.begin(), only.end(), host) == only.end()) only.push_back(host);
    }
    if (only.empty()) {
      sojourn::DieUsage(kProgram, "--hosts lists no host (give comma-separated names)");
    }
  }
  int64_t start_unix = 0;
  if (a.Has("since")) {
    start_unix = std::max<int64_t>(0, absl::ToUnixSeconds(absl::Now() - DurationArg(a, "since")));
  }
  const std::vector<std::string> statemgrs = StatemgrArg(a);
  const std::string broker = statemgrs.empty() ? BrokerAddress(a) : "";
  const bool skip = a.Flag("skip-unreadable");
  const std::string out = ExportOutArg(a);
  (void)Deadline(a);  // a bad --timeout is refused before any call
  // Before any call too: a FILE that cannot be written is bad usage, whatever
  // the cluster says. On a failure half way the writer removes FILE.tmp, so
  // FILE is not written at all; standard output has had the hosts before.
  const bool handled = RemoveExportTmpOnSignal(out);
  auto writer = sojourn::traces::CanonicalCsvWriter::Open(out);
  if (!writer.ok()) sojourn::DieUsage(kProgram, absl::StrCat("--out: ", writer.status().message()));
  const std::string not_written = out == "-" ? "" : absl::StrCat(" (", out, " not written)");
  // Hosts whose samples could not be read (--skip-unreadable), and state
  // managers that could not list theirs.
  std::vector<std::string> left_out;

  // The hosts to export and where each one's samples are.
  struct Source {
    std::string host;
    std::string statemgr;
    sojourn::v1::HostAttributes attributes;
  };
  std::vector<Source> sources;
  std::set<std::string> seen;
  grpc::ChannelArguments channel_args;
  channel_args.SetMaxReceiveMessageSize(64 << 20);
  std::map<std::string, std::unique_ptr<sojourn::v1::StateManager::Stub>> stubs;
  auto stub = [&](const std::string& address) -> sojourn::v1::StateManager::Stub& {
    auto& s = stubs[address];
    if (s == nullptr) {
      s = sojourn::v1::StateManager::NewStub(
          grpc::CreateCustomChannel(address, Credentials(), channel_args));
    }
    return *s;
  };
  if (!statemgrs.empty()) {
    for (const std::string& address : statemgrs) {
      grpc::ClientContext ctx;
      ctx.set_deadline(Deadline(a));
      sojourn::v1::ListHostsResponse resp;
      grpc::Status st = stub(address).ListHosts(&ctx, {}, &resp);
      if (!st.ok() && skip) {
        std::fprintf(
            stderr, "%s: export: the hosts of %s: left out (listing them: %s)\n", kProgram,
            address.c_str(),
            st.error_message().empty() ? CodeName(st.error_code()) : st.error_message().c_str());
        left_out.push_back("the hosts of " + address);
        continue;
      }
      if (!st.ok()) {
        return Fail(st, absl::StrCat("listing the hosts of ", address, not_written), "statemgr",
                    address);
      }
      for (const auto& h : resp.hosts()) {
        // A host moved between state managers: its samples at the first one
        // named (two series of one host would interleave out of time order).
        if (!seen.insert(h.host()).second) {
          std::fprintf(stderr,
                       "%s: export: host %s is held by more than one of the state managers; "
                       "exporting it from the first one named\n",
                       kProgram, sojourn::Excerpt(h.host()).c_str());
          continue;
        }
        sources.push_back({h.host(), address, h.attributes()});
      }
    }
  } else {
    sojourn::v1::BrokerListHostsResponse resp;
    if (int code = ListBrokerHosts(a, "listing hosts" + not_written, &resp); code != 0) {
      return code;
    }
    for (const auto& h : resp.hosts()) {
      if (seen.insert(h.host()).second) {
        sources.push_back({h.host(), h.statemgr_address(), h.attributes()});
      }
    }
  }
  if (!only.empty()) {
    for (const std::string& h : only) {
      // Maybe on a state manager left out above: left out too.
      if (seen.count(h) == 0 && !left_out.empty()) {
        std::fprintf(stderr, "%s: export: %s: left out (not listed by the state managers read)\n",
                     kProgram, sojourn::Excerpt(h).c_str());
        left_out.push_back(h);
        continue;
      }
      if (seen.count(h) == 0) {
        std::fprintf(stderr, "%s: export: host %s is not known to %s%s%s\n", kProgram,
                     sojourn::Excerpt(h).c_str(),
                     statemgrs.empty()
                         ? ("the broker " + broker).c_str()
                         : ("the state managers " + absl::StrJoin(statemgrs, ", ")).c_str(),
                     statemgrs.empty() ? " (give its state manager with --statemgr ADDR)" : "",
                     not_written.c_str());
        return sojourn::kExitUsage;
      }
    }
    const std::set<std::string> wanted(only.begin(), only.end());
    sources.erase(std::remove_if(sources.begin(), sources.end(),
                                 [&](const Source& s) { return wanted.count(s.host) == 0; }),
                  sources.end());
  }
  std::sort(sources.begin(), sources.end(),
            [](const Source& x, const Source& y) { return x.host < y.host; });

  int64_t hosts_written = 0, hosts_read = 0;
  // With --skip-unreadable, a state manager that did not answer is not asked
  // again for its other hosts (each call would wait out --timeout).
  std::map<std::string, std::string> unreachable;
  std::vector<sojourn::HostSample> page;
  for (const Source& src : sources) {
    if (auto u = unreachable.find(src.statemgr); u != unreachable.end()) {
      std::fprintf(stderr, "%s: export: %s: left out (%s)\n", kProgram,
                   sojourn::Excerpt(src.host).c_str(), u->second.c_str());
      left_out.push_back(src.host);
      continue;
    }
    // A host's samples go to the writer a page at a time; with
    // --skip-unreadable they are held until the host is read whole, so a
    // host left out half way leaves no rows.
    std::vector<sojourn::HostSample> held;
    int64_t from = start_unix, count = 0, first = 0, last = 0;
    grpc::Status failed;
    while (true) {
      sojourn::v1::GetSeriesRequest req;
      req.set_host(src.host);
      req.set_start_unix_seconds(from);
      req.set_max_samples(kExportPageSamples);
      sojourn::v1::GetSeriesResponse resp;
      grpc::ClientContext ctx;
      ctx.set_deadline(Deadline(a));
      failed = stub(src.statemgr).GetSeries(&ctx, req, &resp);
      if (!failed.ok()) break;
      page.clear();
      page.reserve(resp.samples_size());
      for (const auto& p : resp.samples()) {
        sojourn::HostSample s;
        s.unix_seconds = p.unix_seconds();
        s.cpu_load = p.cpu_load_ratio();
        if (p.has_free_mem_mb()) s.free_mem_mb = p.free_mem_mb();
        page.push_back(s);
      }
      if (skip) {
        held.insert(held.end(), page.begin(), page.end());
      } else if (absl::Status w = (*writer)->Write(src.host, page, src.attributes.total_mem_mb(),
                                                   src.attributes.cpu_cores());
                 !w.ok()) {
        std::fprintf(stderr, "%s: export: %s%s\n", kProgram, std::string(w.message()).c_str(),
                     not_written.c_str());
        return 1;
      }
      if (!page.empty()) {
        if (count == 0) first = page.front().unix_seconds;
        last = page.back().unix_seconds;
        count += static_cast<int64_t>(page.size());
      }
      // A page cut short by max_samples goes on after its newest sample (a
      // host's samples have distinct timestamps: the store keys them by time).
      if (!resp.truncated() || page.empty()) break;
      from = last + 1;
    }
    if (!failed.ok()) {
      const std::string what = absl::StrCat("reading the samples of ", sojourn::Excerpt(src.host),
                                            " from ", src.statemgr);
      if (!skip) return Fail(failed, what + not_written, "statemgr", src.statemgr);
      std::string why =
          failed.error_message().empty() ? CodeName(failed.error_code()) : failed.error_message();
      std::fprintf(stderr, "%s: export: %s: left out (%s: %s)\n", kProgram,
                   sojourn::Excerpt(src.host).c_str(), what.c_str(), why.c_str());
      // Not connected: its other hosts would fail alike. (A deadline may be
      // one slow page: its other hosts are still asked.)
      if (failed.error_code() == grpc::StatusCode::UNAVAILABLE) {
        unreachable[src.statemgr] =
            absl::StrCat("its state manager ", src.statemgr, " did not answer");
      }
      left_out.push_back(src.host);
      continue;
    }
    if (skip) {
      if (absl::Status w = (*writer)->Write(src.host, held, src.attributes.total_mem_mb(),
                                            src.attributes.cpu_cores());
          !w.ok()) {
        std::fprintf(stderr, "%s: export: %s%s\n", kProgram, std::string(w.message()).c_str(),
                     not_written.c_str());
        return 1;
      }
    }
    ++hosts_read;
    if (count > 0) ++hosts_written;
    std::fprintf(
        stderr, "%s: export: %s: %lld samples%s\n", kProgram, sojourn::Excerpt(src.host).c_str(),
        static_cast<long long>(count),
        count > 0 ? absl::StrCat(" from ", PrintTime(first), " to ", PrintTime(last)).c_str() : "");
  }
  // Everything asked for left out: a header alone is no export (and must not
  // replace a good FILE).
  if (hosts_read == 0 && !left_out.empty()) {
    std::fprintf(stderr, "%s: export: no host could be read%s\n", kProgram, not_written.c_str());
    return 1;
  }
  const absl::Status finished = (*writer)->Finish();
  if (handled) HandleExportSignals(false);
  if (absl::Status f = finished; !f.ok()) {
    std::fprintf(stderr, "%s: export: %s%s\n", kProgram, std::string(f.message()).c_str(),
                 not_written.c_str());
    return 1;
  }
  std::fprintf(stderr, "%s: export: wrote %lld samples of %lld hosts to %s%s\n", kProgram,
               static_cast<long long>((*writer)->rows()), static_cast<long long>(hosts_written),
               out == "-" ? "standard output" : out.c_str(),
               left_out.empty() ? ""
                                : absl::StrCat("; could not read, left out: ",
                                               sojourn::Excerpt(absl::StrJoin(left_out, ", ")))
                                      .c_str());
  return 0;
}

// The job history is read this many records at a time (pages of about 1 MB;
// the predictor takes at most 20,000).
constexpr int kExportPageJobs = 10000;

int ExportJobs(int argc, char** argv) {
  Args a = Parse(argc, argv, CommandHelp(kExportJobsHelp, kPredictorHelp),
                 With({"since", "nodes", "out"}), {});
  int64_t since = 0;
  if (a.Has("since")) {
    since = std::max<int64_t>(1, absl::ToUnixSeconds(absl::Now() - DurationArg(a, "since")));
  }
  const int64_t nodes_flag =
      a.Has("nodes") ? a.GetIntInRange("nodes", 0, 1, sojourn::turnaround::kSwfMaxNodes) : 0;
  const std::string out = ExportOutArg(a);
  (void)Deadline(a);  // a bad --timeout is refused before any call
  // The address too (DieUsage does not remove FILE.tmp; Parse checked the
  // TLS files).
  const std::string predictor = PredictorAddress(a);
  grpc::ChannelArguments channel_args;
  channel_args.SetMaxReceiveMessageSize(64 << 20);
  auto stub = sojourn::v1::Predictor::NewStub(
      grpc::CreateCustomChannel(predictor, Credentials(), channel_args));
  // As for `sojourn export`: FILE is checked before any call.
  const bool handled = RemoveExportTmpOnSignal(out);
  auto file = sojourn::OutputFile::Open(out);
  if (!file.ok()) sojourn::DieUsage(kProgram, absl::StrCat("--out: ", file.status().message()));
  const std::string not_written = out == "-" ? "" : absl::StrCat(" (", out, " not written)");
  std::vector<sojourn::turnaround::SwfJob> jobs;
  int64_t history = 0, cluster_nodes = 0;
  std::string token;
  absl::Time reported = absl::Now();
  do {
    sojourn::v1::ListJobHistoryRequest req;
    req.set_page_size(kExportPageJobs);
    req.set_page_token(token);
    req.set_submitted_since_unix_seconds(since);
    sojourn::v1::ListJobHistoryResponse resp;
    grpc::ClientContext ctx;
    ctx.set_deadline(Deadline(a));
    grpc::Status st = stub->ListJobHistory(&ctx, req, &resp);
    if (!st.ok()) {
      return Fail(st, "reading the job history" + not_written,
                  "predictor of a build that has ListJobHistory", predictor);
    }
    if (!resp.next_page_token().empty() && resp.next_page_token() == token) {
      std::fprintf(stderr, "%s: export-jobs: the predictor %s returned the same page twice%s\n",
                   kProgram, predictor.c_str(), not_written.c_str());
      return 1;
    }
    history = resp.history_records();
    for (const sojourn::v1::JobHistoryRecord& r : resp.records()) {
      // Times stay absolute until the log's start is known (the first submit).
      sojourn::turnaround::SwfJob j;
      j.job_number = r.job().job_id();
      j.submit_time = r.job().submit_unix_seconds();
      j.wait_time = std::max<int64_t>(0, r.start_unix_seconds() - r.job().submit_unix_seconds());
      j.run_time = std::max<int64_t>(0, r.finish_unix_seconds() - r.start_unix_seconds());
      j.allocated_procs = r.job().procs();
      j.avg_cpu_time = r.cpu_seconds_per_task() >= 0 ? r.cpu_seconds_per_task() : -1;
      j.requested_procs = r.job().procs();
      j.requested_time = r.job().requested_seconds() > 0 ? r.job().requested_seconds() : -1;
      j.status = 1;
      j.user = r.job().user();
      j.group = r.job().group();
      j.executable = r.job().executable();
      j.queue = r.job().queue();
      jobs.push_back(j);
      cluster_nodes = std::max<int64_t>(cluster_nodes, r.cluster_nodes());
    }
    token = resp.next_page_token();
    if (!token.empty() && absl::Now() - reported >= absl::Seconds(5)) {
      reported = absl::Now();
      std::fprintf(stderr, "%s: export-jobs: %zu of %lld records read\n", kProgram, jobs.size(),
                   static_cast<long long>(history));
    }
  } while (!token.empty());
  if (jobs.empty()) {
    std::fprintf(stderr, "%s: export-jobs: the job history of %s holds %lld finished jobs%s%s\n",
                 kProgram, predictor.c_str(), static_cast<long long>(history),
                 since > 0 && history > 0
                     ? absl::StrCat(", none submitted since ", PrintTime(since)).c_str()
                     : "",
                 not_written.c_str());
    return 1;
  }
  std::sort(jobs.begin(), jobs.end(), [](const auto& x, const auto& y) {
    return std::tie(x.submit_time, x.job_number, x.wait_time) <
           std::tie(y.submit_time, y.job_number, y.wait_time);
  });
  const int64_t start = jobs.front().submit_time;
  const int64_t end = jobs.back().submit_time;
  for (auto& j : jobs) j.submit_time -= start;
  // A size ReadSwf would refuse (from a store that is not a predictor's) is
  // left out rather than making the log unreadable.
  const bool oversized = cluster_nodes > sojourn::turnaround::kSwfMaxNodes;
  if (oversized) {
    std::fprintf(stderr,
                 "%s: export-jobs: the recorded cluster size %lld is above the SWF limit of %lld; "
                 "no MaxNodes written (give --nodes N)\n",
                 kProgram, static_cast<long long>(cluster_nodes),
                 static_cast<long long>(sojourn::turnaround::kSwfMaxNodes));
    cluster_nodes = 0;
  }
  const int64_t machine = nodes_flag > 0 ? nodes_flag : cluster_nodes;
  std::vector<std::pair<std::string, std::string>> header = {
      {"Version", "2.2"},
      {"Computer", "a sojourn cluster"},
      {"Installation", absl::StrCat("the job history of the predictor at ", predictor)},
      {"Conversion",
       absl::StrCat("sojourn export-jobs (", sojourn::BuildCommit(), ") on ",
                    absl::FormatTime("%Y-%m-%d %H:%M:%S UTC", absl::Now(), absl::UTCTimeZone()))},
      {"MaxJobs", absl::StrCat(jobs.size())},
      {"MaxRecords", absl::StrCat(jobs.size())},
      {"UnixStartTime", absl::StrCat(start)},
      {"TimeZoneString", "UTC"},
  };
  if (machine > 0) {
    header.emplace_back("MaxNodes", absl::StrCat(machine));
    header.emplace_back("MaxProcs", absl::StrCat(machine));
  }
  header.emplace_back(
      "Note", "finished jobs only, status 1; fields 7, 10, 16, 17 and 18 are not recorded (-1)");
  if (absl::Status w = sojourn::turnaround::WriteSwf(header, jobs, file->get()); !w.ok()) {
    std::fprintf(stderr, "%s: export-jobs: %s%s\n", kProgram, std::string(w.message()).c_str(),
                 not_written.c_str());
    return 1;
  }
  if (handled) HandleExportSignals(false);
  std::string size;
  if (machine > 0) {
    size = absl::StrCat("MaxNodes ", machine,
                        nodes_flag > 0 ? " (--nodes)" : " (the largest cluster recorded)");
  } else if (oversized) {
    size = "no MaxNodes: the recorded size is above the SWF limit (give --nodes N)";
  } else {
    size = "no MaxNodes: the history does not record the cluster's size (give --nodes N)";
  }
  std::fprintf(stderr,
               "%s: export-jobs: wrote %zu jobs submitted from %s to %s (of %lld in the job "
               "history) to %s; %s\n",
               kProgram, jobs.size(), PrintTime(start).c_str(), PrintTime(end).c_str(),
               static_cast<long long>(history), out == "-" ? "standard output" : out.c_str(),
               size.c_str());
  return 0;
}

// Records sent to ImportJobHistory at a time (about 1 MB; it takes 20,000).
constexpr size_t kImportBatchJobs = 10000;

int ImportJobs(int argc, char** argv) {
  namespace ta = sojourn::turnaround;
  Args a = Parse(argc, argv, CommandHelp(kImportJobsHelp, kPredictorHelp),
                 With({"swf", "policy", "nsp"}), {"json"});
  if (!a.Has("swf")) sojourn::DieUsage(kProgram, "import-jobs needs --swf FILE");
  const std::string swf = a.Get("swf", "");
  ta::EvalConfig config;
  config.progress = [](const std::string& line) {
    std::fprintf(stderr, "%s: import-jobs: %s\n", kProgram, line.c_str());
  };
  absl::StatusOr<ta::JobSelection> jsel = ta::ParseJobSelection(a.Get("policy", "easy"));
  if (!jsel.ok()) sojourn::DieUsage(kProgram, absl::StrCat("--policy: ", jsel.status().message()));
  absl::StatusOr<ta::NodeSelection> nsel = ta::ParseNodeSelection(a.Get("nsp", "normal"));
  if (!nsel.ok()) sojourn::DieUsage(kProgram, absl::StrCat("--nsp: ", nsel.status().message()));
  config.policy = {*jsel, *nsel, 1};
  (void)Deadline(a);  // a bad --timeout is refused before the log is read
  const std::string predictor = PredictorAddress(a);

  absl::StatusOr<ta::SwfLog> log = ta::ReadSwf(swf, {});
  if (!log.ok()) sojourn::DieUsage(kProgram, std::string(log.status().message()));
  if (log->jobs.empty()) sojourn::DieUsage(kProgram, absl::StrCat(swf, ": no job lines"));
  for (const ta::SwfIssue& issue : log->warnings) {
    std::fprintf(stderr, "%s: %s:%lld: warning: %s\n", kProgram, swf.c_str(),
                 static_cast<long long>(issue.line), issue.reason.c_str());
  }
  if (log->oversized_jobs > 1) {
    std::fprintf(stderr,
                 "%s: warning: %lld jobs of %s need more processors than the header's machine; "
                 "they are recorded with its size\n",
                 kProgram, static_cast<long long>(log->oversized_jobs), swf.c_str());
  }
  // The predictor takes no job after its clock (+ skew): the whole log is
  // judged here, naming the header or the line, before anything is sent.
  const int64_t latest = absl::ToUnixSeconds(absl::Now()) + sojourn::kMaxJobClockSkewSeconds;
  const int64_t offset = std::max<int64_t>(0, log->header.unix_start_time);
  int64_t last_finish = 0;
  for (const ta::SwfJob& j : log->jobs) {
    if (!j.has_turnaround()) continue;
    last_finish = std::max(last_finish, j.submit_time + j.wait_time + j.run_time);
    // The ids are 32 bits in the history (a larger one would become another).
    for (const auto& [name, id] : {std::pair<const char*, int64_t>{"user", j.user},
                                   {"group", j.group},
                                   {"executable", j.executable},
                                   {"queue", j.queue}}) {
      if (id > INT32_MAX) {
        sojourn::DieUsage(kProgram, absl::StrCat(swf, ":", j.line, ": ", name, " id ", id,
                                                 " is above 2^31 - 1, the largest a job "
                                                 "history keeps"));
      }
    }
  }
  if (offset > latest || last_finish > latest - offset) {
    sojourn::DieUsage(kProgram,
                      log->header.unix_start_time > 0
                          ? absl::StrCat(swf, ": UnixStartTime ", log->header.unix_start_time,
                                         " and the last finish ", last_finish,
                                         " s after it are later than now: is it in seconds?")
                          : absl::StrCat(swf, ": the last finish, ", last_finish,
                                         " s, is later than now (the log has no UnixStartTime)"));
  }
  {
    // An SWF log numbers each job once. Repeats are most likely a history
    // imported twice and exported (each job twice), which this import would
    // record twice again; said, not refused (a site's numbering may wrap).
    absl::flat_hash_map<int64_t, int64_t> first_line;
    int64_t repeated = 0;
    std::string example;
    for (const ta::SwfJob& j : log->jobs) {
      if (j.job_number < 0) continue;
      auto [it, fresh] = first_line.emplace(j.job_number, j.line);
      if (fresh) continue;
      if (repeated++ == 0) {
        example = absl::StrCat("job ", j.job_number, " at lines ", it->second, " and ", j.line);
      }
    }
    if (repeated > 0) {
      std::fprintf(stderr,
                   "%s: warning: %s has %lld job%s whose number came before (%s): a log "
                   "numbers each job once, so it may hold jobs twice (an export of a history "
                   "imported twice?), and they would be recorded twice\n",
                   kProgram, swf.c_str(), static_cast<long long>(repeated),
                   repeated == 1 ? "" : "s", example.c_str());
    }
  }
  if (log->header.cluster_size() <= 0) {
    int64_t largest = 0;
    for (const ta::SwfJob& j : log->jobs) largest = std::max(largest, j.procs());
    std::fprintf(stderr,
                 "%s: warning: %s has no usable MaxProcs or MaxNodes header line: the machine "
                 "is taken as %lld node%s, its largest job; if it was larger, add '; MaxNodes: N' at the "
                 "top of the log before importing it\n",
                 kProgram, swf.c_str(), static_cast<long long>(largest), largest == 1 ? "" : "s");
  }
  std::vector<int64_t> lines;
  absl::StatusOr<std::vector<ta::JobRecord>> records =
      ta::ReplayHistory(*log, config, offset, &lines);
  if (!records.ok()) {
    std::fprintf(stderr, "%s: import-jobs: replaying %s: %s\n", kProgram, swf.c_str(),
                 std::string(records.status().message()).c_str());
    return absl::IsInvalidArgument(records.status()) ? sojourn::kExitUsage : 1;
  }
  if (records->empty()) {
    const bool any_wait = std::any_of(log->jobs.begin(), log->jobs.end(),
                                      [](const ta::SwfJob& j) { return j.wait_time >= 0; });
    sojourn::DieUsage(kProgram, absl::StrCat(swf, ": none of its ", log->jobs.size(),
                                             " jobs has both a wait and a run time (fields 3 "
                                             "and 4)",
                                             any_wait ? ""
                                                      : "; field 3 is -1 everywhere, so no "
                                                        "job's start is known"));
  }

  std::vector<sojourn::v1::JobHistoryRecord> protos;
  protos.reserve(records->size());
  for (size_t i = 0; i < records->size(); ++i) {
    protos.push_back(sojourn::predictor::ToProto((*records)[i]));
    // As the predictor will check it: a refusal half way would leave the
    // batches before it recorded.
    if (auto back = sojourn::predictor::FromProto(protos.back(), latest); !back.ok()) {
      sojourn::DieUsage(kProgram, absl::StrCat(swf, ":", lines[i], ": ", back.status().message()));
    }
  }

  grpc::ChannelArguments channel_args;
  channel_args.SetMaxSendMessageSize(64 << 20);
  auto stub = sojourn::v1::Predictor::NewStub(
      grpc::CreateCustomChannel(predictor, Credentials(), channel_args));
  int64_t history = 0;
  {
    // Asked first: a predictor without job history (or of an older build)
    // is named before anything is sent.
    sojourn::v1::ListJobHistoryRequest req;
    req.set_page_size(1);
    sojourn::v1::ListJobHistoryResponse resp;
    grpc::ClientContext ctx;
    ctx.set_deadline(Deadline(a));
    grpc::Status st = stub->ListJobHistory(&ctx, req, &resp);
    if (!st.ok()) return Fail(st, "reading the job history", "predictor", predictor);
    history = resp.history_records();
  }
  const int64_t history_before = history;

  absl::flat_hash_map<int64_t, const ta::SwfJob*> by_line;
  for (const ta::SwfJob& j : log->jobs) by_line[j.line] = &j;
  const size_t batches = (protos.size() + kImportBatchJobs - 1) / kImportBatchJobs;
  int64_t imported = 0, already = 0;
  absl::Time reported = absl::Now();
  for (size_t b = 0; b < batches; ++b) {
    const size_t begin = b * kImportBatchJobs;
    const size_t end = std::min(protos.size(), begin + kImportBatchJobs);
    sojourn::v1::ImportJobHistoryRequest req;
    // Named by what it was made of, the log's own lines (not the replay's
    // figures, which another build may round differently), the time offset
    // and the policy: the same batch of a later import is recorded once. A
    // log without its machine's size also has the size taken (its largest
    // job) in the name, so that the log with its header added is another
    // import (its records differ); a log with a header keeps the names the
    // first builds of import-jobs gave it.
    std::string named = absl::StrCat(offset, " ",
                                     ta::JobSelectionName(config.policy.job_selection), " ",
                                     ta::NodeSelectionName(config.policy.node_selection));
    if (log->header.cluster_size() <= 0) {
      absl::StrAppend(&named, " nodes ", protos[begin].cluster_nodes());
    }
    uint64_t hash = sojourn::Fnv1a64(named);
    for (size_t i = begin; i < end; ++i) {
      *req.add_records() = protos[i];
      hash = sojourn::Fnv1a64(ta::FormatSwfJob(*by_line.at(lines[i])), hash);
    }
    req.set_batch_id(absl::StrFormat("swf-%016x-%d", hash, end - begin));
    sojourn::v1::ImportJobHistoryResponse resp;
    grpc::ClientContext ctx;
    ctx.set_deadline(Deadline(a));
    grpc::Status st = stub->ImportJobHistory(&ctx, req, &resp);
    if (!st.ok()) {
      std::string what = absl::StrCat("importing ", swf);
      // "records[K]: ..." names the job's line in the log.
      int k = -1;
      if (absl::StartsWith(st.error_message(), "records[") &&
          std::sscanf(st.error_message().c_str(), "records[%d]", &k) == 1 && k >= 0 &&
          begin + k < end) {
        what = absl::StrCat(swf, ":", lines[begin + k], ": importing the job");
      }
      // A refusal wrote nothing of this batch; after any other failure it
      // may have been written (the predictor finishes what it got).
      const bool refused = st.error_code() == grpc::StatusCode::INVALID_ARGUMENT ||
                           st.error_code() == grpc::StatusCode::FAILED_PRECONDITION;
      if (!refused) {
        what += absl::StrCat(" (batch ", b + 1, " of ", batches,
                             b > 0 ? absl::StrCat("; batches 1-", b, " are recorded").c_str() : "",
                             "; running the same import again finishes it)");
      } else if (b > 0) {
        what += absl::StrCat(" (batches 1-", b, " of ", batches, " are recorded)");
      }
      return Fail(st, what, "predictor of a build that has ImportJobHistory", predictor);
    }
    imported += resp.imported();
    if (resp.already_imported()) already += static_cast<int64_t>(end - begin);
    history = resp.history_records();
    if (b + 1 < batches && absl::Now() - reported >= absl::Seconds(5)) {
      reported = absl::Now();
      std::fprintf(stderr, "%s: import-jobs: %zu of %zu jobs sent\n", kProgram, end, protos.size());
    }
  }
  if (a.Flag("json")) {
    std::printf(
        "{\"jobs_in_log\": %zu, \"jobs_finished\": %zu, \"imported\": %lld, "
        "\"already_imported\": %lld, \"history_records\": %lld}\n",
        log->jobs.size(), protos.size(), static_cast<long long>(imported),
        static_cast<long long>(already), static_cast<long long>(history));
  }
  std::fprintf(stderr,
               "%s: import-jobs: %s: %zu jobs, %zu with a wait and a run time; %lld imported into "
               "the job history of %s%s; it holds %lld finished jobs\n",
               kProgram, swf.c_str(), log->jobs.size(), protos.size(),
               static_cast<long long>(imported), predictor.c_str(),
               already > 0 ? absl::StrCat(" (", already,
                                          " already there from an earlier import of this log)")
                                 .c_str()
                           : "",
               static_cast<long long>(history));
  // (A resumed import's own earlier batches are not older jobs.)
  if (imported > 0 && history_before > 0 && already == 0) {
    std::fprintf(stderr,
                 "%s: import-jobs: note: the history held %lld jobs before; the kernels take the "
                 "imported ones as newer than those\n",
                 kProgram, static_cast<long long>(history_before));
  }
  return 0;
}

// FILE ('-' = standard input), opened with `f` if need be; exits 2 naming
// `flag` when it cannot be opened.
std::istream& OpenInput(const std::string& file, const std::string& flag, std::ifstream& f) {
  if (file == "-") return std::cin;
  std::error_code ec;
  if (std::filesystem::is_directory(file, ec)) {
    sojourn::DieUsage(kProgram, absl::StrCat(flag, " ", file, ": is a directory, not a file"));
  }
  f.open(file, std::ios::binary);
  if (!f) sojourn::DieUsage(kProgram, absl::StrCat(flag, " ", file, ": ", std::strerror(errno)));
  return f;
}

// Reads FILE ('-' = standard input) whole; exits 2 naming `flag` when it cannot.
std::string ReadInput(const std::string& file, const std::string& flag) {
  std::ifstream f;
  std::istream& in = OpenInput(file, flag, f);
  std::string text;
  errno = 0;
  try {
    // libstdc++'s filebuf throws on a failed read(2) (e.g. EIO), whatever the
    // stream's exception mask.
    text.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  } catch (const std::exception&) {
    in.setstate(std::ios::badbit);
  }
  if (in.bad()) {
    sojourn::DieUsage(kProgram, absl::StrCat(flag, " ", file, ": read error",
                                             errno != 0 ? absl::StrCat(": ", std::strerror(errno))
                                                        : std::string()));
  }
  return text;
}

// `text` as a message of m's type (proto field names or JSON names; unknown
// fields refused); the reason on failure.
absl::Status FromJson(absl::string_view text, google::protobuf::Message* m) {
  google::protobuf::util::JsonParseOptions opt;
  opt.ignore_unknown_fields = false;
  auto st = google::protobuf::util::JsonStringToMessage(
      google::protobuf::StringPiece(text.data(), text.size()), m, opt);
  if (st.ok()) return absl::OkStatus();
  // The parser's message may go on with the text and a caret: one line only.
  const std::string message(st.message().data(), st.message().size());
  return absl::InvalidArgumentError(message.substr(0, message.find('\n')));
}

std::string Seconds(double s) { return s >= 0 ? Hours(s) : std::string("-"); }

std::string Interval(const sojourn::v1::TimeInterval& t) {
  return absl::StrFormat("%s [%s, %s]", Seconds(t.point_seconds()), Seconds(t.lo_seconds()),
                         Seconds(t.hi_seconds()));
}

// The job options shared by `turnaround` and `jobs submit` (--procs
// required, at most `max_procs`; --job-id from `min_id`).
void JobSpecFromArgs(const Args& a, int64_t min_id, int64_t max_procs, sojourn::v1::JobSpec* job) {
  if (!a.Has("procs")) sojourn::DieUsage(kProgram, "--procs is required");
  job->set_procs(static_cast<int32_t>(a.GetIntInRange("procs", 1, 1, max_procs)));
  job->set_job_id(a.GetIntInRange("job-id", 0, min_id, INT64_MAX));
  job->set_user(static_cast<int32_t>(a.GetIntInRange("user", -1, -1, INT32_MAX)));
  job->set_group(static_cast<int32_t>(a.GetIntInRange("group", -1, -1, INT32_MAX)));
  job->set_executable(static_cast<int32_t>(a.GetIntInRange("executable", -1, -1, INT32_MAX)));
  job->set_queue(static_cast<int32_t>(a.GetIntInRange("swf-queue", -1, -1, INT32_MAX)));
  job->set_requested_seconds(
      a.Has("requested") ? absl::ToInt64Seconds(DurationArg(a, "requested")) : -1);
  if (a.Has("cpu")) {
    const double cpu = NumberArg(a, "cpu", 0);
    if (!(cpu > 0 && cpu <= 1)) {
      sojourn::DieUsage(kProgram, "--cpu must be a share of a CPU in (0, 1], got '" +
                                      sojourn::Excerpt(a.Get("cpu")) + "'");
    }
    job->set_cpu_ratio(cpu);
  }
}

// The kernels' answer as a table, under a line describing the job and cluster.
void PrintEstimates(const sojourn::v1::JobSpec& job, const sojourn::v1::ClusterSnapshot& snap,
                    const google::protobuf::RepeatedPtrField<sojourn::v1::KernelEstimate>& estimates,
                    const char* where) {
  std::printf("job %lld: %d procs, requested %s; %s%d nodes, %d running and %d waiting jobs at %s\n",
              static_cast<long long>(job.job_id()), job.procs(),
              job.requested_seconds() > 0 ? Hours(job.requested_seconds()).c_str() : "unknown",
              where, snap.nodes_size(), snap.running_size(), snap.waiting_size(),
              absl::FormatTime("%Y-%m-%d %H:%M:%S UTC",
                               absl::FromUnixSeconds(snap.now_unix_seconds()),
                               absl::UTCTimeZone())
                  .c_str());
  std::printf("%-11s %-27s %-27s %-27s %s\n", "KERNEL", "WAIT [LO, HI]", "RUN [LO, HI]",
              "TURNAROUND [LO, HI]", "HISTORY");
  for (const auto& e : estimates) {
    std::printf("%-11s %-27s %-27s %-27s %s\n", e.kernel().c_str(), Interval(e.wait()).c_str(),
                Interval(e.exec()).c_str(), Interval(e.turnaround()).c_str(),
                !e.from_history()          ? "none"
                : e.matched_records() > 0
                    ? absl::StrCat(e.matched_records(), e.matched_records() == 1 ? " job" : " jobs")
                          .c_str()
                                          : "yes");
  }
}

int Turnaround(int argc, char** argv) {
  static const std::string kAddresses = std::string(kPredictorHelp) +
                                        "  --broker ADDR          broker address, with --queue "
                                        "(env SOJOURN_BROKER, default 127.0.0.1:7401)\n";
  Args a = Parse(argc, argv, CommandHelp(kTurnaroundHelp, kAddresses.c_str()),
                 With({"procs", "requested", "user", "group", "executable", "swf-queue", "cpu",
                       "job-id", "nodes", "snapshot"}),
                 {"json", "queue"});
  sojourn::v1::EstimateTurnaroundRequest req;
  sojourn::v1::JobSpec* job = req.mutable_job();
  JobSpecFromArgs(a, 0, 1000000, job);
  if (a.Flag("queue")) {
    if (a.Has("nodes") || a.Has("snapshot")) {
      sojourn::DieUsage(kProgram, "give the cluster with one of --nodes N, --snapshot FILE or --queue");
    }
    const std::string broker = BrokerAddress(a);
    auto stub = sojourn::v1::Broker::NewStub(grpc::CreateChannel(broker, Credentials()));
    sojourn::v1::EstimateJobTurnaroundRequest breq;
    *breq.mutable_job() = *job;  // submitted now, by the broker's clock
    grpc::ClientContext ctx;
    ctx.set_deadline(Deadline(a));
    sojourn::v1::EstimateJobTurnaroundResponse resp;
    grpc::Status s = stub->EstimateJobTurnaround(&ctx, breq, &resp);
    if (!s.ok()) return Fail(s, "estimating the turnaround on the broker's queue", "broker", broker);
    if (a.Flag("json")) {
      PrintJson(resp);
      return 0;
    }
    PrintEstimates(*job, resp.snapshot(), resp.estimates(), "the broker's queue: ");
    return 0;
  }
  if (a.Has("nodes") == a.Has("snapshot")) {
    sojourn::DieUsage(kProgram,
                      "give the cluster with one of --nodes N, --snapshot FILE or --queue");
  }
  sojourn::v1::ClusterSnapshot* snap = req.mutable_snapshot();
  if (a.Has("snapshot")) {
    const std::string text = ReadInput(a.Get("snapshot"), "--snapshot");
    if (absl::Status st = FromJson(text, snap); !st.ok()) {
      sojourn::DieUsage(kProgram, absl::StrCat("--snapshot ", a.Get("snapshot"),
                                               " is not a ClusterSnapshot: ", st.message()));
    }
    if (snap->nodes().empty()) {
      sojourn::DieUsage(kProgram, "--snapshot " + a.Get("snapshot") + " lists no nodes");
    }
    // The job is submitted when the snapshot was taken.
    if (snap->now_unix_seconds() <= 0) {
      sojourn::DieUsage(kProgram, "--snapshot " + a.Get("snapshot") +
                                      " needs now_unix_seconds > 0 (when it was taken)");
    }
  } else {
    const int nodes = static_cast<int>(a.GetIntInRange("nodes", 0, 1, 1000000));
    snap->set_now_unix_seconds(static_cast<int64_t>(std::time(nullptr)));
    for (int n = 0; n < nodes; ++n) snap->add_nodes();
  }
  job->set_submit_unix_seconds(snap->now_unix_seconds());

  const std::string predictor = PredictorAddress(a);
  grpc::ChannelArguments channel_args;
  channel_args.SetMaxSendMessageSize(256 << 20);  // snapshots of large clusters
  auto stub = sojourn::v1::Predictor::NewStub(
      grpc::CreateCustomChannel(predictor, Credentials(), channel_args));
  grpc::ClientContext ctx;
  ctx.set_deadline(Deadline(a));
  sojourn::v1::EstimateTurnaroundResponse resp;
  grpc::Status s = stub->EstimateTurnaround(&ctx, req, &resp);
  if (!s.ok()) return Fail(s, "estimating the turnaround", "predictor", predictor);
  if (a.Flag("json")) {
    PrintJson(resp);
    return 0;
  }
  PrintEstimates(*job, *snap, resp.estimates(), "");
  return 0;
}

void PrintQueuedJob(const sojourn::v1::QueuedJob& j) {
  const auto& sp = j.spec();
  std::printf(
      "%-10lld %-8s %6d %10s %6d %6d  %s  %s\n", static_cast<long long>(sp.job_id()),
      j.start_unix_seconds() <= 0 ? "waiting"
      : j.overdue_seconds() > 0   ? "overdue"
                                  : "running",
      sp.procs(), sp.requested_seconds() > 0 ? Hours(sp.requested_seconds()).c_str() : "-",
      sp.user(), sp.executable(),
      absl::FormatTime("%Y-%m-%d %H:%M:%S",
                       absl::FromUnixSeconds(j.start_unix_seconds() > 0 ? j.start_unix_seconds()
                                                                        : sp.submit_unix_seconds()),
                       absl::UTCTimeZone())
          .c_str(),
      absl::StrJoin(j.hosts(), ",").c_str());
}

int Jobs(int argc, char** argv) {
  // The action is the first argument that is neither an option nor an
  // option's value (`sojourn jobs --broker B submit ...` works too).
  std::string action = "list";
  std::vector<char*> rest;
  bool found = false;
  for (int i = 0; i < argc; ++i) {
    const absl::string_view arg = argv[i];
    if (!found && !absl::StartsWith(arg, "-")) {
      action = std::string(arg);
      found = true;
      continue;
    }
    rest.push_back(argv[i]);
    const bool takes_value = absl::StartsWith(arg, "--") && !absl::StrContains(arg, '=') &&
                             arg != "--json" && arg != "--help" && arg != "-h";
    if (takes_value && i + 1 < argc) rest.push_back(argv[++i]);
  }
  argc = static_cast<int>(rest.size());
  argv = rest.data();
  if (action != "list" && action != "submit" && action != "start" && action != "finish" &&
      action != "cancel") {
    sojourn::DieUsage(kProgram, "jobs: unknown action '" + sojourn::Excerpt(action) +
                                    "' (list, submit, start, finish or cancel)");
  }
  Args a = Parse(argc, argv, CommandHelp(kJobsHelp, kBrokerHelp),
                 With({"job-id", "procs", "requested", "user", "group", "executable", "swf-queue",
                       "cpu", "hosts", "cpu-seconds"}),
                 {"json"});
  const std::string broker = BrokerAddress(a);
  auto stub = sojourn::v1::Broker::NewStub(grpc::CreateChannel(broker, Credentials()));
  grpc::ClientContext ctx;
  ctx.set_deadline(Deadline(a));
  if (action == "list") {
    sojourn::v1::ListJobsResponse resp;
    grpc::Status s = stub->ListJobs(&ctx, {}, &resp);
    if (!s.ok()) return Fail(s, "listing the job queue", "broker", broker);
    if (a.Flag("json")) {
      PrintJson(resp);
      return 0;
    }
    std::printf("%d waiting, %d running on %d hosts\n", resp.waiting_size(), resp.running_size(),
                resp.snapshot_hosts_size());
    std::printf("%-10s %-8s %6s %10s %6s %6s  %-19s  %s\n", "JOB", "STATE", "PROCS", "REQUESTED",
                "USER", "EXEC", "SUBMIT/START (UTC)", "HOSTS");
    for (const auto& j : resp.waiting()) PrintQueuedJob(j);
    int overdue = 0;
    int64_t longest = 0, longest_id = 0;
    for (const auto& j : resp.running()) {
      PrintQueuedJob(j);
      if (j.overdue_seconds() <= 0) continue;
      ++overdue;
      if (j.overdue_seconds() > longest) {
        longest = j.overdue_seconds();
        longest_id = j.spec().job_id();
      }
    }
    if (overdue > 0) {
      std::printf(
          "%d running job%s past %s requested time (job %lld by %s): most schedulers kill a job "
          "then, so report %s finish or cancel %s (sojourn jobs cancel --job-id N); %s hosts "
          "stay out of rankings until then\n",
          overdue, overdue == 1 ? " is" : "s are", overdue == 1 ? "its" : "their",
          static_cast<long long>(longest_id), Hours(static_cast<double>(longest)).c_str(),
          overdue == 1 ? "its" : "their", overdue == 1 ? "it" : "them",
          overdue == 1 ? "its" : "their");
    }
    return 0;
  }
  if (!a.Has("job-id")) sojourn::DieUsage(kProgram, "--job-id is required");
  const int64_t id = a.GetIntInRange("job-id", 0, 1, INT64_MAX);
  sojourn::v1::JobQueueResponse resp;
  grpc::Status s;
  if (action == "submit") {
    sojourn::v1::SubmitJobRequest req;
    // The broker's queue takes jobs of at most kMaxJobHosts (100000) hosts
    // (services/broker/job_queue.h).
    JobSpecFromArgs(a, 1, 100000, req.mutable_job());
    s = stub->SubmitJob(&ctx, req, &resp);
  } else if (action == "start") {
    sojourn::v1::StartJobRequest req;
    req.set_job_id(id);
    for (absl::string_view h : absl::StrSplit(Required(a, "hosts"), ',', absl::SkipEmpty())) {
      req.add_hosts(HostArg(h, "--hosts"));
    }
    if (req.hosts().empty()) sojourn::DieUsage(kProgram, "--hosts names no host");
    s = stub->StartJob(&ctx, req, &resp);
  } else {
    sojourn::v1::FinishJobRequest req;
    req.set_job_id(id);
    req.set_cancelled(action == "cancel");
    if (a.Has("cpu-seconds")) {
      if (action == "cancel") sojourn::DieUsage(kProgram, "--cpu-seconds is for finish");
      req.set_cpu_seconds_per_task(NumberArg(a, "cpu-seconds", 0));
    }
    s = stub->FinishJob(&ctx, req, &resp);
  }
  if (!s.ok()) return Fail(s, absl::StrCat(action, " job ", id), "broker", broker);
  if (a.Flag("json")) {
    PrintJson(resp);
    return 0;
  }
  std::printf("job %lld %s; the queue holds %d waiting and %d running jobs; %s\n",
              static_cast<long long>(id),
              action == "submit"   ? "queued"
              : action == "start"  ? "running"
              : action == "finish" ? "finished"
                                   : "cancelled",
              resp.waiting_jobs(), resp.running_jobs(),
              resp.recorded_in_history()
                  ? absl::StrCat("the job history recorded it (", resp.history_records(),
                                 " finished jobs)")
                        .c_str()
                  : absl::StrCat("the job history did not record it: ", resp.history_error())
                        .c_str());
  return 0;
}

int JobEvent(int argc, char** argv) {
  Args a = Parse(argc, argv, CommandHelp(kJobEventHelp, kPredictorHelp), With({"file"}),
                 {"json"});
  const std::string file = a.Get("file", "-");
  std::ifstream f;
  std::istream* in = &OpenInput(file, "--file", f);
  const std::string name = file == "-" ? "standard input" : file;
  const std::string predictor = PredictorAddress(a);
  grpc::ChannelArguments channel_args;
  channel_args.SetMaxSendMessageSize(256 << 20);
  auto stub = sojourn::v1::Predictor::NewStub(
      grpc::CreateCustomChannel(predictor, Credentials(), channel_args));
  int64_t recorded = 0, history = -1, line_no = 0;
  auto done = [&] {
    if (a.Flag("json")) {
      // history_records is null when no event was sent (nothing was asked).
      std::printf("{\"events_recorded\": %lld, \"history_records\": %s}\n",
                  static_cast<long long>(recorded),
                  history >= 0 ? absl::StrCat(history).c_str() : "null");
    } else if (history >= 0) {
      std::printf("recorded %lld events; the job history holds %lld records\n",
                  static_cast<long long>(recorded), static_cast<long long>(history));
    } else {
      std::printf("recorded 0 events (%s has none)\n", name.c_str());
    }
  };
  auto last_progress = std::chrono::steady_clock::now();
  std::string line;
  while (std::getline(*in, line)) {
    ++line_no;
    absl::string_view t = absl::StripAsciiWhitespace(line);
    if (t.empty() || t[0] == '#') continue;
    sojourn::v1::JobEvent event;
    if (absl::Status st = FromJson(t, &event); !st.ok()) {
      std::fprintf(stderr, "%s: %s:%lld: not a job event: %s\n", kProgram, name.c_str(),
                   static_cast<long long>(line_no), std::string(st.message()).c_str());
      if (recorded > 0) done();
      return sojourn::kExitUsage;
    }
    grpc::ClientContext ctx;
    ctx.set_deadline(Deadline(a));
    sojourn::v1::RecordJobEventResponse resp;
    grpc::Status s = stub->RecordJobEvent(&ctx, event, &resp);
    if (!s.ok()) {
      const int code = Fail(s, absl::StrCat(name, ":", line_no, ": recording the event"),
                            "predictor", predictor);
      if (recorded > 0) done();
      return code;
    }
    ++recorded;
    history = resp.history_records();
    const auto now = std::chrono::steady_clock::now();
    if (now - last_progress > std::chrono::seconds(10)) {
      std::fprintf(stderr, "%s: %lld events recorded (line %lld)\n", kProgram,
                   static_cast<long long>(recorded), static_cast<long long>(line_no));
      last_progress = now;
    }
  }
  if (in->bad()) {
    // The events before it stay recorded (a partly readable file is bad input).
    if (recorded > 0) done();
    sojourn::DieUsage(kProgram, absl::StrCat(name, ": read error after line ", line_no));
  }
  done();
  return 0;
}

}  // namespace

// gRPC core's own log lines ("E1207 ... ssl_transport_security.cc] Handshake
// failed") went to stderr before the command's one-line error, which says the
// same with the address and a hint. Kept when GRPC_VERBOSITY or GRPC_TRACE is
// set (debugging a connection).
static void QuietGrpcCoreLog(gpr_log_func_args* args) {
  // An assertion of gRPC's own is printed: the abort that follows it would
  // otherwise say nothing.
  if (args->severity == GPR_LOG_SEVERITY_ERROR && args->message != nullptr &&
      std::strstr(args->message, "assertion failed") != nullptr) {
    std::fprintf(stderr, "%s: gRPC: %s\n", kProgram, args->message);
  }
}

int main(int argc, char** argv) {
  if (std::getenv("GRPC_VERBOSITY") == nullptr && std::getenv("GRPC_TRACE") == nullptr) {
    gpr_set_log_function(QuietGrpcCoreLog);
  }
  if (argc < 2) {
    std::fputs(kUsage, stderr);
    return sojourn::kExitUsage;
  }
  std::string cmd = argv[1];
  if (cmd == "--help" || cmd == "-h" || cmd == "help") {
    std::fputs(kUsage, stdout);
    return 0;
  }
  if (cmd == "--version" || cmd == "version") {
    std::fputs(sojourn::VersionText(kProgram).c_str(), stdout);
    return 0;
  }
  if (cmd == "hosts") return Hosts(argc - 2, argv + 2);
  if (cmd == "availability") return Availability(argc - 2, argv + 2);
  if (cmd == "rank") return Rank(argc - 2, argv + 2);
  if (cmd == "usage") return Usage(argc - 2, argv + 2);
  if (cmd == "can-run") return CanRun(argc - 2, argv + 2);
  if (cmd == "how-long") return HowLong(argc - 2, argv + 2);
  if (cmd == "guest") return Guest(argc - 2, argv + 2);
  if (cmd == "watch") return Watch(argc - 2, argv + 2);
  if (cmd == "export") return Export(argc - 2, argv + 2);
  if (cmd == "export-jobs") return ExportJobs(argc - 2, argv + 2);
  if (cmd == "import-jobs") return ImportJobs(argc - 2, argv + 2);
  if (cmd == "turnaround") return Turnaround(argc - 2, argv + 2);
  if (cmd == "job-event") return JobEvent(argc - 2, argv + 2);
  if (cmd == "jobs") return Jobs(argc - 2, argv + 2);
  sojourn::DieUsage(kProgram, "unknown command '" + cmd + "' (try --help)");
}
