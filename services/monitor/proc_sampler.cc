#include "services/monitor/proc_sampler.h"

#include <algorithm>
#include <filesystem>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "common/proc_stat.h"

namespace sojourn::monitor {

absl::StatusOr<ProcCounters> ProcSampler::Read(const std::set<int>& guest_pids) const {
  ProcCounters c;
  auto stat = ReadProcFile(proc_root_ + "/stat");
  if (!stat.ok()) return stat.status();
  for (absl::string_view line : absl::StrSplit(*stat, '\n')) {
    if (absl::StartsWith(line, "cpu ")) {
      std::vector<absl::string_view> f = absl::StrSplit(line, ' ', absl::SkipEmpty());
      // cpu user nice system idle iowait irq softirq steal guest guest_nice
      // guest/guest_nice are already inside user/nice: sum fields 1..8 only.
      for (size_t i = 1; i < f.size() && i <= 8; ++i) {
        uint64_t v = 0;
        if (!absl::SimpleAtoi(f[i], &v)) {
          return absl::DataLossError(absl::StrCat("malformed ", proc_root_, "/stat"));
        }
        c.total_ticks += v;
        if (i == 4 || i == 5) c.idle_ticks += v;
      }
    } else if (absl::StartsWith(line, "cpu")) {
      ++c.cpus;
    }
  }
  if (c.total_ticks == 0) {
    return absl::DataLossError(absl::StrCat("no cpu line in ", proc_root_, "/stat"));
  }
  auto meminfo = ReadProcFile(proc_root_ + "/meminfo");
  if (!meminfo.ok()) return meminfo.status();
  for (absl::string_view line : absl::StrSplit(*meminfo, '\n')) {
    std::vector<absl::string_view> f = absl::StrSplit(line, ' ', absl::SkipEmpty());
    if (f.size() < 2) continue;
    double kb = 0;
    if (!absl::SimpleAtod(f[1], &kb)) continue;
    if (f[0] == "MemAvailable:") c.mem_available_mb = kb / 1024.0;
    if (f[0] == "MemTotal:") c.mem_total_mb = kb / 1024.0;
  }
  auto vmstat = ReadProcFile(proc_root_ + "/vmstat");
  if (vmstat.ok()) {
    for (absl::string_view line : absl::StrSplit(*vmstat, '\n')) {
      std::vector<absl::string_view> f = absl::StrSplit(line, ' ', absl::SkipEmpty());
      if (f.size() != 2) continue;
      if (f[0] == "pswpin") (void)absl::SimpleAtoi(f[1], &c.pswpin);
      if (f[0] == "pswpout") (void)absl::SimpleAtoi(f[1], &c.pswpout);
    }
  }
  for (int pid : guest_pids) {
    auto s = ReadProcFile(absl::StrCat(proc_root_, "/", pid, "/stat"));
    if (!s.ok()) continue;  // the guest exited
    auto f = PidStatFields(*s);
    if (!f.ok()) continue;
    // utime is field 14, stime field 15.
    uint64_t utime = 0, stime = 0;
    if (f->size() > 12 && absl::SimpleAtoi((*f)[11], &utime) &&
        absl::SimpleAtoi((*f)[12], &stime)) {
      c.guest_ticks[pid] = utime + stime;
    }
  }
  return c;
}

std::optional<HostSample> ProcSampler::Diff(const ProcCounters& prev, const ProcCounters& now,
                                            double seconds) {
  if (now.total_ticks <= prev.total_ticks || now.idle_ticks < prev.idle_ticks ||
      now.pswpin < prev.pswpin || now.pswpout < prev.pswpout || !(seconds > 0)) {
    return std::nullopt;
  }
  const double total = static_cast<double>(now.total_ticks - prev.total_ticks);
  double busy = total - static_cast<double>(now.idle_ticks - prev.idle_ticks);
  for (const auto& [pid, ticks] : now.guest_ticks) {
    auto it = prev.guest_ticks.find(pid);
    if (it == prev.guest_ticks.end()) continue;  // new guest: counted from the next interval
    if (ticks < it->second) return std::nullopt;  // pid reused
    busy -= static_cast<double>(ticks - it->second);
  }
  HostSample s;
  s.cpu_load = std::clamp(busy / total, 0.0, 1.0);
  s.free_mem_mb = now.mem_available_mb;
  s.swap_in_per_s = static_cast<double>(now.pswpin - prev.pswpin) / seconds;
  s.swap_out_per_s = static_cast<double>(now.pswpout - prev.pswpout) / seconds;
  return s;
}

absl::StatusOr<std::optional<HostSample>> ProcSampler::Sample(int64_t unix_seconds,
                                                              const std::set<int>& guest_pids) {
  auto now = Read(guest_pids);
  if (!now.ok()) return now.status();
  std::optional<HostSample> out;
  if (prev_.has_value()) {
    out = Diff(*prev_, *now, static_cast<double>(unix_seconds - prev_unix_));
    if (out.has_value()) out->unix_seconds = unix_seconds;
  }
  prev_ = std::move(*now);
  prev_unix_ = unix_seconds;
  return out;
}

absl::StatusOr<ProcessInfo> ProcSampler::Process(int pid) const {
  const std::string dir = absl::StrCat(proc_root_, "/", pid);
  std::error_code ec;
  if (!std::filesystem::exists(dir, ec)) {
    if (ec) return absl::UnavailableError(absl::StrCat("cannot stat ", dir, ": ", ec.message()));
    return absl::NotFoundError(absl::StrCat("no process with pid ", pid, " in ", proc_root_));
  }
  auto s = ReadProcFile(dir + "/stat");
  // Gone between the two looks, or unreadable.
  if (!s.ok()) {
    if (!std::filesystem::exists(dir, ec) && !ec) return s.status();
    return absl::UnavailableError(s.status().message());
  }
  auto f = PidStatFields(*s);
  // f[0] is field 3 (state); starttime is field 22.
  if (!f.ok() || (*f)[0].size() != 1) {
    return absl::DataLossError(absl::StrCat("malformed ", dir, "/stat"));
  }
  ProcessInfo info;
  info.state = (*f)[0][0];
  uint64_t start = 0;
  if (f->size() > 19 && absl::SimpleAtoi((*f)[19], &start)) info.start_ticks = start;
  return info;
}

sojourn::v1::HostAttributes ProcSampler::Attributes() const {
  sojourn::v1::HostAttributes a;
  auto c = Read({});
  if (c.ok()) {
    a.set_cpu_cores(c->cpus);
    a.set_total_mem_mb(c->mem_total_mb);
  }
  auto cpuinfo = ReadProcFile(proc_root_ + "/cpuinfo");
  if (cpuinfo.ok()) {
    for (absl::string_view line : absl::StrSplit(*cpuinfo, '\n')) {
      if (absl::StartsWith(line, "cpu MHz")) {
        std::vector<absl::string_view> kv = absl::StrSplit(line, ':');
        double mhz = 0;
        if (kv.size() == 2 && absl::SimpleAtod(absl::StripAsciiWhitespace(kv[1]), &mhz)) {
          a.set_cpu_mhz(mhz);
        }
        break;
      }
    }
  }
  return a;
}

}  // namespace sojourn::monitor
