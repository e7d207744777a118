#include <algorithm>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "common/text.h"
#include "models/turnaround/hist_db.h"

namespace sojourn::turnaround {

absl::Status InMemoryHistDb::Put(const JobRecord& record) {
  absl::MutexLock lock(&mu_);
  PutLocked(record);
  return absl::OkStatus();
}

absl::StatusOr<bool> InMemoryHistDb::PutBatch(const std::vector<JobRecord>& records,
                                              const std::string& batch_id) {
  absl::MutexLock lock(&mu_);
  if (!batch_id.empty() && !batches_.insert(batch_id).second) return false;
  for (const JobRecord& r : records) PutLocked(r);
  return true;
}

void InMemoryHistDb::PutLocked(const JobRecord& record) {
  const uint32_t index = static_cast<uint32_t>(records_.size());
  records_.push_back(record);
  for (int level = 0; level < kNumTemplateLevels; ++level) {
    Template& t = templates_[TemplateKey::For(record.spec, static_cast<TemplateLevel>(level))];
    t.stats.Add(record);
    t.records.push_back(index);
  }
}

absl::StatusOr<std::vector<JobRecord>> InMemoryHistDb::Recent(const TemplateKey& key,
                                                              int limit) const {
  absl::MutexLock lock(&mu_);
  std::vector<JobRecord> out;
  auto it = templates_.find(key);
  if (it == templates_.end()) return out;
  const auto& idx = it->second.records;
  const size_t n = std::min<size_t>(idx.size(), limit < 0 ? 0 : static_cast<size_t>(limit));
  out.reserve(n);
  for (size_t i = 0; i < n; ++i) out.push_back(records_[idx[idx.size() - 1 - i]]);
  return out;
}

absl::StatusOr<TemplateStats> InMemoryHistDb::Stats(const TemplateKey& key) const {
  absl::MutexLock lock(&mu_);
  auto it = templates_.find(key);
  if (it == templates_.end()) return TemplateStats{};
  return it->second.stats;
}

int64_t InMemoryHistDb::size() const {
  absl::MutexLock lock(&mu_);
  return static_cast<int64_t>(records_.size());
}

absl::StatusOr<HistoryPage> InMemoryHistDb::Scan(const std::string& cursor, int limit) const {
  if (limit < 1) return absl::InvalidArgumentError(absl::StrCat("scan limit ", limit, " < 1"));
  absl::MutexLock lock(&mu_);
  // The cursor is the index of the next record (records are only appended).
  size_t from = 0;
  const bool digits =
      std::all_of(cursor.begin(), cursor.end(), [](char c) { return c >= '0' && c <= '9'; });
  if (!cursor.empty() && (!digits || !absl::SimpleAtoi(cursor, &from) || from > records_.size())) {
    return absl::InvalidArgumentError(
        absl::StrCat("histdb: '", Excerpt(cursor), "' is no cursor of this job history"));
  }
  HistoryPage page;
  const size_t to = std::min(records_.size(), from + static_cast<size_t>(limit));
  page.records.assign(records_.begin() + from, records_.begin() + to);
  if (to < records_.size()) page.next_cursor = absl::StrCat(to);
  return page;
}

absl::Status InMemoryHistDb::PutPending(const JobRecord& record) {
  absl::MutexLock lock(&mu_);
  pending_[record.spec.job_id] = record;
  return absl::OkStatus();
}

absl::StatusOr<JobRecord> InMemoryHistDb::GetPending(int64_t job_id) const {
  absl::MutexLock lock(&mu_);
  auto it = pending_.find(job_id);
  if (it == pending_.end()) return absl::NotFoundError(absl::StrCat("job ", job_id, " is not pending"));
  return it->second;
}

absl::Status InMemoryHistDb::ErasePending(int64_t job_id) {
  absl::MutexLock lock(&mu_);
  pending_.erase(job_id);
  return absl::OkStatus();
}

}  // namespace sojourn::turnaround
