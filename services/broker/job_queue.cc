#include "services/broker/job_queue.h"

#include <algorithm>
#include <cmath>
#include <set>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/rocks_status.h"
#include "common/status.h"
#include "rocksdb/db.h"
#include "rocksdb/options.h"
#include "rocksdb/write_batch.h"
#include "services/job_spec.h"

namespace sojourn::broker {
namespace {

// Layout: "format" -> kFormat; "job/" + 8-byte big-endian job id -> 8-byte
// big-endian queue sequence + serialized QueuedJob; "outbox/" + 8-byte
// big-endian sequence -> serialized JobEvent (a queue written before the
// outbox has none: the same format).
constexpr char kFormatKey[] = "format";
constexpr char kFormat[] = "sojourn-broker-jobs-v1";
constexpr char kJobPrefix[] = "job/";
constexpr char kOutboxPrefix[] = "outbox/";

void AppendBigEndian(uint64_t v, std::string* out) {
  for (int shift = 56; shift >= 0; shift -= 8) out->push_back(static_cast<char>(v >> shift));
}

uint64_t ReadBigEndian(absl::string_view s) {
  uint64_t v = 0;
  for (int i = 0; i < 8; ++i) v = (v << 8) | static_cast<unsigned char>(s[i]);
  return v;
}

std::string JobKey(int64_t job_id) {
  std::string key = kJobPrefix;
  AppendBigEndian(static_cast<uint64_t>(job_id), &key);
  return key;
}

std::string OutboxKey(uint64_t sequence) {
  std::string key = kOutboxPrefix;
  AppendBigEndian(sequence, &key);
  return key;
}

absl::Status FromRocks(const rocksdb::Status& s, absl::string_view what) {
  return FromRocksStatus(s, absl::StrCat("broker job queue: ", what));
}

}  // namespace

int64_t OverdueSeconds(const sojourn::v1::QueuedJob& job, int64_t now_unix) {
  const int64_t requested = job.spec().requested_seconds();
  if (job.start_unix_seconds() <= 0 || requested <= 0) return 0;
  // Both at most a year (CheckJobSpec) after a start near the clock: no overflow.
  return std::max<int64_t>(0, now_unix - (job.start_unix_seconds() + requested));
}

std::optional<int64_t> ExpiresAt(const sojourn::v1::QueuedJob& job, const JobExpiry& expiry) {
  // All times are within a year of the broker's clock (EventTime) and the
  // periods at most ten years: no overflow.
  const int64_t reported = job.reported_unix_seconds();
  if (job.start_unix_seconds() <= 0) {
    if (expiry.waiting_seconds <= 0) return std::nullopt;
    return std::max(job.spec().submit_unix_seconds(), reported) + expiry.waiting_seconds;
  }
  if (expiry.running_seconds <= 0) return std::nullopt;
  const int64_t due =
      job.start_unix_seconds() + std::max<int64_t>(0, job.spec().requested_seconds());
  return std::max(due, reported) + expiry.running_seconds;
}

JobQueue::JobQueue(std::unique_ptr<rocksdb::DB> db, int max_jobs)
    : db_(std::move(db)), max_jobs_(max_jobs) {}
JobQueue::~JobQueue() = default;

absl::StatusOr<std::unique_ptr<JobQueue>> JobQueue::Open(const std::string& path, int max_jobs) {
  if (path.empty()) return std::unique_ptr<JobQueue>(new JobQueue(nullptr, max_jobs));
  rocksdb::Options opts;
  opts.create_if_missing = true;
  rocksdb::DB* raw = nullptr;
  rocksdb::Status s = rocksdb::DB::Open(opts, path, &raw);
  std::unique_ptr<rocksdb::DB> db(raw);  // own at once (STYLE.md)
  if (!s.ok()) return FromRocks(s, absl::StrCat("open ", path));
  auto queue = std::unique_ptr<JobQueue>(new JobQueue(std::move(db), max_jobs));
  std::string format;
  s = queue->db_->Get(rocksdb::ReadOptions(), kFormatKey, &format);
  std::unique_ptr<rocksdb::Iterator> it(queue->db_->NewIterator(rocksdb::ReadOptions()));
  if (s.IsNotFound()) {
    // Only an empty database may become the queue: another key means
    // another service's data (a state manager's --db_path, a job history).
    it->SeekToFirst();
    if (it->Valid()) {
      return absl::FailedPreconditionError(absl::StrCat(
          "broker job queue ", path, " is not empty but holds no job queue (first key '",
          it->key().ToString().substr(0, 40),
          "'): is it another service's database, such as a state manager's --db_path?"));
    }
    if (!it->status().ok()) return FromRocks(it->status(), "scan");
    s = queue->db_->Put(rocksdb::WriteOptions(), kFormatKey, kFormat);
    if (!s.ok()) return FromRocks(s, "write format");
    return queue;
  }
  if (!s.ok()) return FromRocks(s, "read format");
  if (format != kFormat) {
    return absl::FailedPreconditionError(absl::StrCat("broker job queue ", path, " has format '",
                                                      format.substr(0, 40), "', this build reads '",
                                                      kFormat, "'"));
  }
  absl::MutexLock l(&queue->mu_);
  for (it->Seek(kJobPrefix); it->Valid() && it->key().starts_with(kJobPrefix); it->Next()) {
    const rocksdb::Slice v = it->value();
    Entry e;
    if (it->key().size() != sizeof(kJobPrefix) - 1 + 8 || v.size() < 8 ||
        !e.job.ParseFromArray(v.data() + 8, static_cast<int>(v.size() - 8))) {
      return absl::DataLossError(absl::StrCat("broker job queue ", path,
                                              ": unreadable job record (key of ",
                                              it->key().size(), " bytes)"));
    }
    e.sequence = ReadBigEndian(absl::string_view(v.data(), 8));
    queue->next_sequence_ = std::max(queue->next_sequence_, e.sequence + 1);
    const int64_t id = e.job.spec().job_id();
    queue->jobs_.emplace(id, std::move(e));
  }
  if (!it->status().ok()) return FromRocks(it->status(), "scan");
  for (it->Seek(kOutboxPrefix); it->Valid() && it->key().starts_with(kOutboxPrefix); it->Next()) {
    sojourn::v1::JobEvent event;
    const rocksdb::Slice v = it->value();
    if (it->key().size() != sizeof(kOutboxPrefix) - 1 + 8 ||
        !event.ParseFromArray(v.data(), static_cast<int>(v.size()))) {
      return absl::DataLossError(absl::StrCat("broker job queue ", path,
                                              ": unreadable outbox record (key of ",
                                              it->key().size(), " bytes)"));
    }
    const uint64_t seq =
        ReadBigEndian(absl::string_view(it->key().data() + sizeof(kOutboxPrefix) - 1, 8));
    queue->next_outbox_ = std::max(queue->next_outbox_, seq + 1);
    queue->outbox_.emplace(seq, std::move(event));
  }
  if (!it->status().ok()) return FromRocks(it->status(), "scan");
  return queue;
}

std::optional<std::pair<uint64_t, sojourn::v1::JobEvent>> JobQueue::OutboxFront() const {
  absl::MutexLock l(&mu_);
  if (outbox_.empty()) return std::nullopt;
  return *outbox_.begin();
}

absl::Status JobQueue::PopOutbox(uint64_t sequence) {
  absl::MutexLock l(&mu_);
  if (db_ != nullptr) {
    rocksdb::Status s = db_->Delete(rocksdb::WriteOptions(), OutboxKey(sequence));
    if (!s.ok()) return FromRocks(s, "delete outbox");
  }
  outbox_.erase(sequence);
  return absl::OkStatus();
}

int JobQueue::OutboxSize() const {
  absl::MutexLock l(&mu_);
  return static_cast<int>(outbox_.size());
}

absl::Status JobQueue::Persist(int64_t job_id, const Entry* entry, OutboxAppend* outbox) {
  absl::Status full;
  if (outbox != nullptr && static_cast<int64_t>(outbox_.size()) >= int64_t{10} * max_jobs_) {
    full = absl::ResourceExhaustedError(absl::StrCat(
        "the job history outbox is full (", outbox_.size(),
        " events not yet taken by the predictor): the event is not kept"));
  }
  const bool append = outbox != nullptr && full.ok();
  if (db_ != nullptr) {
    // One write: the change is never on disk without its event (a broker
    // killed while sending it sends it after the restart).
    rocksdb::WriteBatch batch;
    rocksdb::Status s;
    if (entry == nullptr) {
      s = batch.Delete(JobKey(job_id));
    } else {
      std::string value;
      AppendBigEndian(entry->sequence, &value);
      entry->job.AppendToString(&value);
      s = batch.Put(JobKey(job_id), value);
    }
    if (s.ok() && append) s = batch.Put(OutboxKey(next_outbox_), outbox->event.SerializeAsString());
    if (s.ok()) s = db_->Write(rocksdb::WriteOptions(), &batch);
    if (!s.ok()) return FromRocks(s, "write");
  }
  if (append) {
    outbox->sequence = next_outbox_;
    outbox_.emplace(next_outbox_++, outbox->event);
  } else if (outbox != nullptr) {
    outbox->sequence = std::move(full);
  }
  return absl::OkStatus();
}

absl::StatusOr<sojourn::v1::QueuedJob> JobQueue::Submit(const sojourn::v1::JobSpec& spec,
                                                        int64_t now_unix, OutboxAppend* outbox) {
  const int64_t id = spec.job_id();
  RETURN_IF_ERROR(CheckRecordedJobId(id));
  if (spec.submit_unix_seconds() <= 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "job ", id, ": submit_unix_seconds must be > 0, got ", spec.submit_unix_seconds()));
  }
  if (spec.procs() < 1 || spec.procs() > kMaxJobHosts) {
    return absl::InvalidArgumentError(absl::StrCat("job ", id, ": procs must be in [1, ",
                                                   kMaxJobHosts, "] (hosts, one task each), got ",
                                                   spec.procs()));
  }
  // What the predictor checks, so that the queue's snapshot stays one it takes.
  if (absl::Status s = CheckJobSpec(spec); !s.ok()) return s;
  absl::MutexLock l(&mu_);
  if (jobs_.count(id) > 0) {
    return absl::AlreadyExistsError(absl::StrCat("job ", id, " is already queued"));
  }
  if (static_cast<int>(jobs_.size()) >= max_jobs_) {
    return absl::ResourceExhaustedError(absl::StrCat(
        "the job queue is full (", max_jobs_, " jobs, --max_queued_jobs): finish or cancel some"));
  }
  Entry e;
  e.sequence = next_sequence_;
  *e.job.mutable_spec() = spec;
  e.job.set_reported_unix_seconds(now_unix);
  if (absl::Status s = Persist(id, &e, outbox); !s.ok()) return s;
  ++next_sequence_;
  sojourn::v1::QueuedJob out = e.job;
  jobs_.emplace(id, std::move(e));
  return out;
}

absl::StatusOr<sojourn::v1::QueuedJob> JobQueue::Start(int64_t job_id, int64_t start_unix,
                                                       const std::vector<std::string>& hosts,
                                                       int64_t now_unix, OutboxAppend* outbox) {
  absl::MutexLock l(&mu_);
  auto it = jobs_.find(job_id);
  if (it == jobs_.end()) {
    return absl::NotFoundError(absl::StrCat("job ", job_id, " is not queued (submit it first)"));
  }
  const sojourn::v1::QueuedJob& job = it->second.job;
  if (job.start_unix_seconds() > 0) {
    return absl::FailedPreconditionError(absl::StrCat("job ", job_id, " already started at ",
                                                      job.start_unix_seconds()));
  }
  if (start_unix < job.spec().submit_unix_seconds()) {
    return absl::InvalidArgumentError(absl::StrCat("job ", job_id, ": start ", start_unix,
                                                   " is before its submit ",
                                                   job.spec().submit_unix_seconds()));
  }
  if (static_cast<int64_t>(hosts.size()) != job.spec().procs()) {
    return absl::InvalidArgumentError(absl::StrCat("job ", job_id, ": started on ", hosts.size(),
                                                   " hosts for the ", job.spec().procs(),
                                                   " procs it was submitted with (one host per task)"));
  }
  std::set<std::string> seen;
  for (const std::string& h : hosts) {
    if (!seen.insert(h).second) {
      return absl::InvalidArgumentError(
          absl::StrCat("job ", job_id, ": hosts lists '", h, "' twice (one task per host)"));
    }
  }
  Entry updated = it->second;
  updated.job.set_start_unix_seconds(start_unix);
  updated.job.set_reported_unix_seconds(now_unix);
  for (const std::string& h : hosts) updated.job.add_hosts(h);
  if (absl::Status s = Persist(job_id, &updated, outbox); !s.ok()) return s;
  it->second = std::move(updated);
  return it->second.job;
}

absl::StatusOr<sojourn::v1::QueuedJob> JobQueue::Remove(int64_t job_id, OutboxAppend* outbox) {
  absl::MutexLock l(&mu_);
  auto it = jobs_.find(job_id);
  if (it == jobs_.end()) return absl::NotFoundError(absl::StrCat("job ", job_id, " is not queued"));
  if (absl::Status s = Persist(job_id, nullptr, outbox); !s.ok()) return s;
  sojourn::v1::QueuedJob out = std::move(it->second.job);
  jobs_.erase(it);
  return out;
}

absl::StatusOr<std::vector<sojourn::v1::QueuedJob>> JobQueue::RemoveExpired(
    int64_t now_unix, const JobExpiry& expiry) {
  absl::MutexLock l(&mu_);
  std::vector<std::map<int64_t, Entry>::iterator> expired;
  for (auto it = jobs_.begin(); it != jobs_.end(); ++it) {
    const std::optional<int64_t> at = ExpiresAt(it->second.job, expiry);
    if (at.has_value() && *at <= now_unix) expired.push_back(it);
  }
  if (expired.empty()) return std::vector<sojourn::v1::QueuedJob>();
  // Waiting jobs in queue order, then running jobs by start (as List()).
  std::sort(expired.begin(), expired.end(), [](const auto& a, const auto& b) {
    const bool ra = a->second.job.start_unix_seconds() > 0;
    const bool rb = b->second.job.start_unix_seconds() > 0;
    if (ra != rb) return rb;
    if (!ra) return a->second.sequence < b->second.sequence;
    return std::make_pair(a->second.job.start_unix_seconds(), a->first) <
           std::make_pair(b->second.job.start_unix_seconds(), b->first);
  });
  std::vector<sojourn::v1::JobEvent> cancels(expired.size());
  for (size_t i = 0; i < expired.size(); ++i) {
    cancels[i].mutable_cancelled()->set_job_id(expired[i]->first);
  }
  if (db_ != nullptr) {
    rocksdb::WriteBatch batch;
    for (size_t i = 0; i < expired.size(); ++i) {
      rocksdb::Status s = batch.Delete(JobKey(expired[i]->first));
      if (s.ok()) s = batch.Put(OutboxKey(next_outbox_ + i), cancels[i].SerializeAsString());
      if (!s.ok()) return FromRocks(s, "expire");
    }
    rocksdb::Status s = db_->Write(rocksdb::WriteOptions(), &batch);
    if (!s.ok()) return FromRocks(s, "expire");
  }
  std::vector<sojourn::v1::QueuedJob> out;
  out.reserve(expired.size());
  for (size_t i = 0; i < expired.size(); ++i) {
    outbox_.emplace(next_outbox_++, std::move(cancels[i]));
    out.push_back(std::move(expired[i]->second.job));
    jobs_.erase(expired[i]);
  }
  return out;
}

absl::StatusOr<sojourn::v1::QueuedJob> JobQueue::Get(int64_t job_id) const {
  absl::MutexLock l(&mu_);
  auto it = jobs_.find(job_id);
  if (it == jobs_.end()) return absl::NotFoundError(absl::StrCat("job ", job_id, " is not queued"));
  return it->second.job;
}

JobQueue::Listing JobQueue::List() const {
  std::vector<const Entry*> waiting, running;
  Listing out;
  absl::MutexLock l(&mu_);
  for (const auto& [id, e] : jobs_) (e.job.start_unix_seconds() > 0 ? running : waiting).push_back(&e);
  std::sort(waiting.begin(), waiting.end(),
            [](const Entry* a, const Entry* b) { return a->sequence < b->sequence; });
  std::sort(running.begin(), running.end(), [](const Entry* a, const Entry* b) {
    return std::make_pair(a->job.start_unix_seconds(), a->job.spec().job_id()) <
           std::make_pair(b->job.start_unix_seconds(), b->job.spec().job_id());
  });
  for (const Entry* e : waiting) out.waiting.push_back(e->job);
  for (const Entry* e : running) out.running.push_back(e->job);
  return out;
}

JobQueue::Counts JobQueue::Count() const {
  Counts c;
  absl::MutexLock l(&mu_);
  for (const auto& [id, e] : jobs_) ++(e.job.start_unix_seconds() > 0 ? c.running : c.waiting);
  return c;
}

sojourn::v1::ClusterSnapshot BuildSnapshot(int64_t now_unix,
                                           const sojourn::v1::SchedulingPolicy& policy,
                                           const std::vector<sojourn::v1::RegisteredHost>& hosts,
                                           const JobQueue::Listing& jobs, int64_t exclude_job_id,
                                           std::vector<std::string>* node_hosts) {
  sojourn::v1::ClusterSnapshot snap;
  snap.set_now_unix_seconds(now_unix);
  *snap.mutable_policy() = policy;
  std::map<std::string, const sojourn::v1::RegisteredHost*> by_name;
  for (const auto& h : hosts) by_name[h.host()] = &h;
  std::vector<const sojourn::v1::QueuedJob*> running;
  for (const auto& j : jobs.running) {
    if (j.spec().job_id() == exclude_job_id || j.spec().submit_unix_seconds() > now_unix ||
        j.start_unix_seconds() > now_unix) {
      continue;
    }
    running.push_back(&j);
  }
  // Nodes: live hosts, and every host a running job holds (an expired host
  // still holds its tasks until the job is reported finished).
  std::set<std::string> names;
  for (const auto& h : hosts) {
    if (h.live()) names.insert(h.host());
  }
  for (const auto* j : running) names.insert(j->hosts().begin(), j->hosts().end());
  std::map<std::string, int32_t> index;
  node_hosts->clear();
  for (const std::string& n : names) {
    index[n] = static_cast<int32_t>(node_hosts->size());
    node_hosts->push_back(n);
    sojourn::v1::NodeState* node = snap.add_nodes();
    auto h = by_name.find(n);
    if (h != by_name.end() && h->second->has_cpu_load_ratio()) {
      node->set_local_cpu_ratio(std::clamp(h->second->cpu_load_ratio(), 0.0, 1.0));
    }
  }
  for (const auto* j : running) {
    sojourn::v1::RunningJob* r = snap.add_running();
    *r->mutable_spec() = j->spec();
    r->set_start_unix_seconds(j->start_unix_seconds());
    r->set_cpu_seconds_per_task(-1);
    for (const std::string& h : j->hosts()) r->add_nodes(index[h]);
  }
  for (const auto& j : jobs.waiting) {
    if (j.spec().job_id() == exclude_job_id || j.spec().submit_unix_seconds() > now_unix) continue;
    // A job needing more hosts than there are nodes could never start here:
    // under FCFS it would hold every job behind it forever, and the
    // predictor would say the job asked about can never start.
    if (j.spec().procs() > snap.nodes_size()) continue;
    *snap.add_waiting() = j.spec();
  }
  return snap;
}

}  // namespace sojourn::broker
