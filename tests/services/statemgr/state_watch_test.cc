// HostBook's state watchers (DESIGN.md "statemgr: streams state transitions
// to watchers"): every change announced once, in time order, consistent with
// the state grid GetStateIntervals serves; silence announced as S5 once.
#include <optional>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "services/statemgr/host_book.h"
#include "tests/test_util.h"

namespace sojourn::statemgr {
namespace {

using availability::HostState;
using sojourn::testing::IsOk;
using sojourn::testing::TempDir;

constexpr int64_t kMonday = 1700438400;  // 2023-11-20 00:00 UTC
constexpr int64_t kPeriod = 6;

HostSample At(int64_t t, double load, double mem = 4000) {
  HostSample s;
  s.unix_seconds = t;
  s.cpu_load = load;
  s.free_mem_mb = mem;
  return s;
}

class Recorder final : public StateWatcher {
 public:
  void OnStateChange(const StateChange& c) override { changes.push_back(c); }
  void OnClose() override { ++closed; }
  std::vector<StateChange> changes;
  int closed = 0;
};

class StateWatchTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto s = SampleStore::Open(dir_.path(), false);
    ASSERT_THAT(s.status(), IsOk());
    store_ = std::move(*s);
    book_ = std::make_unique<HostBook>(config_, *store_, clock_);
  }
  void TearDown() override {
    if (book_) book_->RemoveWatcher(&rec_);
  }
  void Push(const std::string& host, const std::vector<HostSample>& samples) {
    MetaUpdate meta;
    meta.period_seconds = kPeriod;
    ASSERT_THAT(book_->Append(host, samples, meta).status(), IsOk());
  }
  TempDir dir_;
  std::unique_ptr<SampleStore> store_;
  FakeClock clock_{absl::FromUnixSeconds(kMonday + 86400)};
  HostBookConfig config_;
  std::unique_ptr<HostBook> book_;
  Recorder rec_;
};

// S1, S2, a spike shorter than the grace period (no change), a longer one
// (S3 once it outlasts 60 s), S1 again, then S4: each change once, at the
// sample that showed it, and each agreeing with the grid GetStateIntervals
// serves at the first grid point at or after it.
TEST_F(StateWatchTest, AnnouncesEachChangeOnceAtItsSample) {
  book_->AddWatcher(&rec_, "", true);
  std::vector<HostSample> v;
  int64_t t = kMonday;
  auto run = [&](int n, double load, double mem = 4000) {
    for (int i = 0; i < n; ++i, t += kPeriod) v.push_back(At(t, load, mem));
  };
  run(10, 0.10);                 // S1 (first sample)
  const int64_t s2_at = t;
  run(10, 0.35);                 // S2
  run(5, 0.90);                  // 30 s above Th2: a transient spike, still S2
  run(10, 0.35);
  const int64_t high_from = t - kPeriod;  // the run's load covers the interval since then
  run(20, 0.90);                 // 120 s above Th2: S3 once it lasts > 60 s
  const int64_t s1_at = t;
  run(10, 0.05);
  const int64_t s4_at = t;
  run(5, 0.05, 100);             // free memory below the 256 MiB working set
  // In two batches, split inside the long spike: the online state carries over.
  Push("h", std::vector<HostSample>(v.begin(), v.begin() + 40));
  Push("h", std::vector<HostSample>(v.begin() + 40, v.end()));

  // The first sample of S3: the first one more than the grace period after the run began.
  int64_t s3_at = high_from + kPeriod;
  while (s3_at - high_from <= 60) s3_at += kPeriod;
  struct Want {
    std::optional<HostState> from;
    HostState to;
    int64_t since;
  };
  const std::vector<Want> want = {{std::nullopt, HostState::kS1, kMonday},
                                  {HostState::kS1, HostState::kS2, s2_at},
                                  {HostState::kS2, HostState::kS3, s3_at},
                                  {HostState::kS3, HostState::kS1, s1_at},
                                  {HostState::kS1, HostState::kS4, s4_at}};
  ASSERT_EQ(rec_.changes.size(), want.size());
  int64_t step = 0;
  auto intervals = book_->Intervals("h", 0, 0, &step);
  ASSERT_THAT(intervals.status(), IsOk());
  for (size_t i = 0; i < want.size(); ++i) {
    const StateChange& c = rec_.changes[i];
    SCOPED_TRACE(c.reason);
    EXPECT_EQ(c.host, "h");
    EXPECT_FALSE(c.snapshot);
    EXPECT_EQ(c.from, want[i].from) << "change " << i;
    EXPECT_EQ(c.to, want[i].to) << "change " << i;
    EXPECT_EQ(c.since_unix, want[i].since) << "change " << i;
    EXPECT_FALSE(c.reason.empty());
    // The grid's state at the first grid point at or after the change.
    const int64_t grid_t = (c.since_unix + step - 1) / step * step;
    bool found = false;
    for (const StateInterval& iv : *intervals) {
      if (iv.start_unix <= grid_t && grid_t < iv.end_unix) {
        EXPECT_EQ(iv.state, c.to) << "grid at " << grid_t;
        found = true;
      }
    }
    EXPECT_TRUE(found) << grid_t;
  }
  EXPECT_NE(rec_.changes[2].reason.find("grace"), std::string::npos);
  EXPECT_NE(rec_.changes[4].reason.find("working set"), std::string::npos);
}

// A gap in the samples longer than the revocation gap is S5 from the last
// sample before it, then the state the resumed samples show.
TEST_F(StateWatchTest, GapIsS5ThenResumption) {
  clock_.Set(absl::FromUnixSeconds(kMonday + 6));  // not silent yet when the watcher comes
  Push("h", {At(kMonday, 0.1), At(kMonday + 6, 0.1)});
  book_->AddWatcher(&rec_, "h", false);
  clock_.Set(absl::FromUnixSeconds(kMonday + 612));
  Push("h", {At(kMonday + 606, 0.4), At(kMonday + 612, 0.4)});
  ASSERT_EQ(rec_.changes.size(), 2u);
  EXPECT_EQ(rec_.changes[0].from, HostState::kS1);
  EXPECT_EQ(rec_.changes[0].to, HostState::kS5);
  EXPECT_EQ(rec_.changes[0].since_unix, kMonday + 6);
  EXPECT_NE(rec_.changes[0].reason.find("no sample for 600 s"), std::string::npos)
      << rec_.changes[0].reason;
  EXPECT_EQ(rec_.changes[1].from, HostState::kS5);
  EXPECT_EQ(rec_.changes[1].to, HostState::kS2);
  EXPECT_EQ(rec_.changes[1].since_unix, kMonday + 606);
  EXPECT_NE(rec_.changes[1].reason.find("resumed after 600 s"), std::string::npos);
}

// Silence is announced once, when the clock passes the revocation gap; the
// gap, once samples resume, is not announced again.
TEST_F(StateWatchTest, SilenceIsAnnouncedOnce) {
  clock_.Set(absl::FromUnixSeconds(kMonday + 6));
  Push("h", {At(kMonday, 0.1), At(kMonday + 6, 0.1)});
  book_->AddWatcher(&rec_, "", false);
  clock_.Set(absl::FromUnixSeconds(kMonday + 66));  // 60 s: not yet more than the gap
  EXPECT_EQ(book_->CheckSilence(), 0);
  clock_.Set(absl::FromUnixSeconds(kMonday + 67));
  EXPECT_EQ(book_->CheckSilence(), 1);
  EXPECT_EQ(book_->CheckSilence(), 0);
  ASSERT_EQ(rec_.changes.size(), 1u);
  EXPECT_EQ(rec_.changes[0].to, HostState::kS5);
  EXPECT_EQ(rec_.changes[0].since_unix, kMonday + 6);
  clock_.Set(absl::FromUnixSeconds(kMonday + 400));
  Push("h", {At(kMonday + 400, 0.1)});
  ASSERT_EQ(rec_.changes.size(), 2u);
  EXPECT_EQ(rec_.changes[1].from, HostState::kS5);
  EXPECT_EQ(rec_.changes[1].to, HostState::kS1);
  EXPECT_NE(rec_.changes[1].reason.find("resumed after 394 s"), std::string::npos);
}

// Announced gone by silence, then its buffered samples arrive with no gap:
// the host comes back and the reason says it was never revoked.
TEST_F(StateWatchTest, SilenceWithoutGapSaysTheHostWasThere) {
  clock_.Set(absl::FromUnixSeconds(kMonday + 6));
  Push("h", {At(kMonday, 0.1), At(kMonday + 6, 0.1)});
  book_->AddWatcher(&rec_, "", false);
  clock_.Set(absl::FromUnixSeconds(kMonday + 300));
  EXPECT_EQ(book_->CheckSilence(), 1);
  std::vector<HostSample> buffered;
  for (int64_t t = kMonday + 12; t <= kMonday + 300; t += kPeriod) buffered.push_back(At(t, 0.1));
  Push("h", buffered);
  ASSERT_EQ(rec_.changes.size(), 2u);
  EXPECT_EQ(rec_.changes[1].to, HostState::kS1);
  EXPECT_EQ(rec_.changes[1].since_unix, kMonday + 12);
  EXPECT_NE(rec_.changes[1].reason.find("no gap"), std::string::npos) << rec_.changes[1].reason;
}

// The snapshot gives the current state of the matching hosts (a silent one
// is S5); a host filter keeps other hosts' changes out; a removed watcher
// gets nothing more.
TEST_F(StateWatchTest, SnapshotFilterAndRemoval) {
  clock_.Set(absl::FromUnixSeconds(kMonday + 1000));
  Push("a", {At(kMonday + 990, 0.1), At(kMonday + 996, 0.4)});
  Push("b", {At(kMonday, 0.1)});  // silent for 1000 s
  Recorder all;
  book_->AddWatcher(&all, "", true);
  book_->AddWatcher(&rec_, "a", true);
  EXPECT_EQ(book_->watchers(), 2u);
  ASSERT_EQ(all.changes.size(), 2u);
  EXPECT_TRUE(all.changes[0].snapshot);
  EXPECT_EQ(all.changes[0].host, "a");
  EXPECT_EQ(all.changes[0].to, HostState::kS2);
  EXPECT_EQ(all.changes[0].since_unix, kMonday + 996);
  EXPECT_FALSE(all.changes[0].from.has_value());
  EXPECT_EQ(all.changes[1].host, "b");
  EXPECT_EQ(all.changes[1].to, HostState::kS5);
  ASSERT_EQ(rec_.changes.size(), 1u);
  EXPECT_EQ(rec_.changes[0].host, "a");

  Push("b", {At(kMonday + 1000, 0.1)});
  Push("a", {At(kMonday + 1002, 0.1)});
  ASSERT_EQ(all.changes.size(), 4u);
  EXPECT_EQ(all.changes[2].host, "b");
  EXPECT_EQ(all.changes[3].host, "a");
  ASSERT_EQ(rec_.changes.size(), 2u);
  EXPECT_EQ(rec_.changes[1].to, HostState::kS1);

  book_->RemoveWatcher(&all);
  Push("a", {At(kMonday + 1008, 0.4)});
  EXPECT_EQ(all.changes.size(), 4u);
  EXPECT_EQ(rec_.changes.size(), 3u);
  book_->CloseWatchers();
  EXPECT_EQ(rec_.closed, 1);
  EXPECT_EQ(all.closed, 0);
}

// After a restart the online state is rebuilt from the stored samples
// without announcing anything: the snapshot says S3 since the sample that
// first showed it, and the next sample's change follows from there.
TEST_F(StateWatchTest, LoadRebuildsTheStateSilently) {
  std::vector<HostSample> v;
  for (int i = 0; i < 30; ++i) v.push_back(At(kMonday + i * kPeriod, i < 10 ? 0.1 : 0.95));
  clock_.Set(absl::FromUnixSeconds(kMonday + 29 * kPeriod));
  Push("h", v);
  book_.reset();
  HostBook book(config_, *store_, clock_);
  ASSERT_THAT(book.Load(), IsOk());
  book.AddWatcher(&rec_, "", true);
  ASSERT_EQ(rec_.changes.size(), 1u);
  EXPECT_EQ(rec_.changes[0].to, HostState::kS3);
  // Load above Th2 from the sample at 10 * period, covering the interval
  // since 9 * period; S3 at the first sample more than 60 s after that.
  EXPECT_EQ(rec_.changes[0].since_unix, kMonday + 20 * kPeriod);
  ASSERT_THAT(book.Append("h", {At(kMonday + 30 * kPeriod, 0.1)}).status(), IsOk());
  ASSERT_EQ(rec_.changes.size(), 2u);
  EXPECT_EQ(rec_.changes[1].from, HostState::kS3);
  EXPECT_EQ(rec_.changes[1].to, HostState::kS1);
  book.RemoveWatcher(&rec_);
}

// A new period changes the host's revocation gap for the samples after it,
// not for its history: samples 84 s apart sent at a 60 s period are one run
// (gap 90 s: S3, the load is high) and stay so after the period becomes 6 s
// (before session 42 each became a return after a revocation, and a host
// replayed at 300 s then fed every 6 s had all its history turned into S5).
// Nothing is announced, watchers, a new watcher's snapshot and ListHosts
// agree; once a sample was sent at 6 s, 84 s without one is a revocation.
TEST_F(StateWatchTest, NewPeriodKeepsTheHistoryAndJudgesNewGaps) {
  std::vector<HostSample> v;
  for (int i = 0; i < 10; ++i) v.push_back(At(kMonday + 84 * i, 0.9));
  const int64_t last = v.back().unix_seconds;
  clock_.Set(absl::FromUnixSeconds(last));
  MetaUpdate slow;
  slow.period_seconds = 60;
  ASSERT_THAT(book_->Append("h", v, slow).status(), IsOk());
  book_->AddWatcher(&rec_, "", true);
  ASSERT_EQ(rec_.changes.size(), 1u);
  EXPECT_EQ(rec_.changes[0].to, HostState::kS3);
  EXPECT_EQ(rec_.changes[0].since_unix, kMonday + 84);

  MetaUpdate fast;
  fast.period_seconds = 6;
  ASSERT_THAT(book_->Append("h", {}, fast).status(), IsOk());
  EXPECT_EQ(rec_.changes.size(), 1u);
  auto info = book_->Info("h");
  ASSERT_THAT(info.status(), IsOk());
  EXPECT_EQ(info->state, HostState::kS3);
  EXPECT_EQ(info->state_since_unix, kMonday + 84);
  EXPECT_EQ(info->meta.history_period_seconds, 60);
  EXPECT_EQ(info->meta.period_changed_unix, last);
  EXPECT_EQ(info->revocation_gap_seconds, 90);  // after its newest sample, sent at 60 s
  int64_t step = 0;
  auto intervals = book_->Intervals("h", 0, 0, &step);
  ASSERT_THAT(intervals.status(), IsOk());
  EXPECT_EQ(step, 6);
  for (const StateInterval& i : *intervals) EXPECT_NE(i.state, HostState::kS5) << i.start_unix;
  Recorder fresh;
  book_->AddWatcher(&fresh, "", true);
  ASSERT_EQ(fresh.changes.size(), 1u);
  EXPECT_EQ(fresh.changes[0].to, info->state);
  EXPECT_EQ(fresh.changes[0].since_unix, info->state_since_unix);
  book_->RemoveWatcher(&fresh);

  // The first sample at the new period follows one sent at the old: 84 s is
  // no revocation yet. After it, 84 s is one (gap 60 s now).
  clock_.Set(absl::FromUnixSeconds(last + 84));
  ASSERT_THAT(book_->Append("h", {At(last + 84, 0.1)}, fast).status(), IsOk());
  ASSERT_EQ(rec_.changes.size(), 2u);
  EXPECT_EQ(rec_.changes[1].from, HostState::kS3);
  EXPECT_EQ(rec_.changes[1].to, HostState::kS1);
  EXPECT_EQ(book_->Info("h")->revocation_gap_seconds, 60);
  clock_.Set(absl::FromUnixSeconds(last + 168));
  ASSERT_THAT(book_->Append("h", {At(last + 168, 0.1)}, fast).status(), IsOk());
  ASSERT_EQ(rec_.changes.size(), 4u);
  EXPECT_EQ(rec_.changes[2].from, HostState::kS1);
  EXPECT_EQ(rec_.changes[2].to, HostState::kS5);
  EXPECT_EQ(rec_.changes[2].since_unix, last + 84);
  EXPECT_EQ(rec_.changes[3].from, HostState::kS5);
  EXPECT_EQ(rec_.changes[3].to, HostState::kS1);
}

}  // namespace
}  // namespace sojourn::statemgr
