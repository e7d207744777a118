// db_backup_bench: what an online backup (--backup_dir, common/db_backup.h)
// of a state manager's database costs, beside copying the directory.
//
//   build/bin/db_backup_bench [--hosts 1] [--days 365] [--rounds 3] [--dir /tmp]
//
// Fills a state manager's SampleStore (the service's own code) with --days of
// 6 s samples for each of --hosts hosts, flushed to table files as the
// service leaves them. Then, --rounds times, alternating the order:
//   copy         a recursive copy of the database directory (what an operator
//                would do with the service stopped; the baseline),
//   full         the first backup into an empty backup directory,
//   incremental  a second backup after one more hour of samples per host,
//   restore      sojourn-backup restore of the newest backup into a new directory.
// Prints JSON: the database size, each run's seconds, the medians and the
// ratios of the medians to the copy's.
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/clock.h"
#include "common/db_backup.h"
#include "rocksdb/db.h"
#include "services/statemgr/sample_store.h"

namespace {

namespace fs = std::filesystem;

double Seconds(std::chrono::steady_clock::time_point since) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - since).count();
}

uint64_t DirBytes(const std::string& dir) {
  uint64_t total = 0;
  for (const auto& e : fs::recursive_directory_iterator(dir)) {
    if (e.is_regular_file()) total += e.file_size();
  }
  return total;
}

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

[[noreturn]] void Die(const std::string& what) {
  std::fprintf(stderr, "db_backup_bench: %s\n", what.c_str());
  std::exit(1);
}

// Samples of `host` every 6 s in [from, to): a load that moves through the day.
void Fill(sojourn::statemgr::SampleStore& store, int host, int64_t from, int64_t to) {
  const std::string name = absl::StrCat("bench-host-", host);
  std::vector<sojourn::HostSample> batch;
  uint64_t x = 0x9e3779b97f4a7c15ULL * static_cast<uint64_t>(host + 1);
  for (int64_t t = from; t < to; t += 6) {
    x ^= x << 13, x ^= x >> 7, x ^= x << 17;
    sojourn::HostSample s;
    s.unix_seconds = t;
    s.cpu_load = static_cast<double>(x % 1000) / 1000.0;
    s.free_mem_mb = 1000.0 + static_cast<double>(x % 4096);
    s.swap_in_per_s = 0;
    s.swap_out_per_s = 0;
    batch.push_back(s);
    if (batch.size() == 10000) {
      if (!store.Append(name, batch, nullptr).ok()) Die("append failed");
      batch.clear();
    }
  }
  if (!batch.empty() && !store.Append(name, batch, nullptr).ok()) Die("append failed");
}

}  // namespace

int main(int argc, char** argv) {
  int64_t hosts = 1, days = 365, rounds = 3;
  std::string base = fs::temp_directory_path().string();
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc) Die(a + " needs a value");
      return argv[++i];
    };
    if (a == "--hosts") {
      if (!absl::SimpleAtoi(value(), &hosts) || hosts < 1) Die("--hosts wants an integer >= 1");
    } else if (a == "--days") {
      if (!absl::SimpleAtoi(value(), &days) || days < 1) Die("--days wants an integer >= 1");
    } else if (a == "--rounds") {
      if (!absl::SimpleAtoi(value(), &rounds) || rounds < 1) Die("--rounds wants an integer >= 1");
    } else if (a == "--dir") {
      base = value();
    } else {
      Die("unknown option " + a + " (--hosts, --days, --rounds, --dir)");
    }
  }
  std::string tmpl = (fs::path(base) / "db-backup-bench-XXXXXX").string();
  if (mkdtemp(tmpl.data()) == nullptr) Die("cannot create a directory in " + base);
  const fs::path work(tmpl);
  const std::string db_path = (work / "db").string();

  auto store = sojourn::statemgr::SampleStore::Open(db_path, /*sync_writes=*/false);
  if (!store.ok()) Die(std::string(store.status().message()));
  const int64_t start = 1'700'000'000;
  int64_t end = start + days * 86400;
  auto fill_started = std::chrono::steady_clock::now();
  for (int h = 0; h < hosts; ++h) Fill(**store, h, start, end);
  if (!(*store)->db()->Flush(rocksdb::FlushOptions()).ok()) Die("flush failed");
  // Settled, as an old database is (and no compaction runs during the timings).
  if (!(*store)->db()->CompactRange(rocksdb::CompactRangeOptions(), nullptr, nullptr).ok()) {
    Die("compaction failed");
  }
  std::fprintf(stderr, "filled %lld host-days in %.1f s\n", static_cast<long long>(hosts * days),
               Seconds(fill_started));

  sojourn::FakeClock clock;
  std::vector<double> copy_s, full_s, incremental_s, restore_s;
  uint64_t db_bytes = 0, backup_bytes = 0, incremental_new = 0;
  for (int r = 0; r < rounds; ++r) {
    const fs::path round_dir = work / absl::StrCat("round-", r);
    fs::create_directories(round_dir);
    auto copy = [&] {
      auto t = std::chrono::steady_clock::now();
      fs::copy(db_path, round_dir / "copy", fs::copy_options::recursive);
      copy_s.push_back(Seconds(t));
    };
    if (r % 2 == 0) copy();
    sojourn::DbBackupConfig config;
    config.service = "statemgr";
    config.backup_dir = (round_dir / "backups").string();
    config.db_path = db_path;
    auto backup = sojourn::DbBackup::Open(config, (*store)->db(), clock, nullptr);
    if (!backup.ok()) Die(std::string(backup.status().message()));
    auto t = std::chrono::steady_clock::now();
    auto full = (*backup)->BackupNow();
    if (!full.ok()) Die(std::string(full.status().message()));
    full_s.push_back(Seconds(t));
    backup_bytes = full->size_bytes;
    for (int h = 0; h < hosts; ++h) Fill(**store, h, end, end + 3600);
    end += 3600;
    clock.Advance(absl::Hours(1));
    t = std::chrono::steady_clock::now();
    auto incremental = (*backup)->BackupNow();
    if (!incremental.ok()) Die(std::string(incremental.status().message()));
    incremental_s.push_back(Seconds(t));
    incremental_new = incremental->new_bytes;
    backup->reset();
    t = std::chrono::steady_clock::now();
    auto restored = sojourn::RestoreBackup(config.backup_dir, 0, (round_dir / "restored").string());
    if (!restored.ok()) Die(std::string(restored.status().message()));
    restore_s.push_back(Seconds(t));
    if (r % 2 == 1) copy();
    db_bytes = DirBytes(db_path);
    fs::remove_all(round_dir);
  }
  fs::remove_all(work);

  auto list = [](const std::vector<double>& v) {
    std::string s = "[";
    for (size_t i = 0; i < v.size(); ++i) s += absl::StrFormat("%s%.3f", i ? ", " : "", v[i]);
    return s + "]";
  };
  const double copy_median = Median(copy_s);
  std::printf(
      "{\n  \"hosts\": %lld, \"days\": %lld, \"period_seconds\": 6, \"rounds\": %lld,\n"
      "  \"db_mb\": %.1f, \"backup_mb\": %.1f, \"incremental_new_mb\": %.2f,\n"
      "  \"seconds\": {\"copy\": %s, \"full\": %s, \"incremental\": %s, \"restore\": %s},\n"
      "  \"median_seconds\": {\"copy\": %.3f, \"full\": %.3f, \"incremental\": %.3f, "
      "\"restore\": %.3f},\n"
      "  \"ratio_to_copy\": {\"full\": %.2f, \"incremental\": %.3f, \"restore\": %.2f}\n}\n",
      static_cast<long long>(hosts), static_cast<long long>(days), static_cast<long long>(rounds),
      db_bytes / 1048576.0, backup_bytes / 1048576.0, incremental_new / 1048576.0,
      list(copy_s).c_str(), list(full_s).c_str(), list(incremental_s).c_str(),
      list(restore_s).c_str(), copy_median, Median(full_s), Median(incremental_s),
      Median(restore_s), Median(full_s) / copy_median, Median(incremental_s) / copy_median,
      Median(restore_s) / copy_median);
  return 0;
}
