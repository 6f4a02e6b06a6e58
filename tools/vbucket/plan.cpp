/// `vbucket plan`: one epoch's batches for one rank (or every rank) as JSON lines, one object
/// per step: {"step":k,"bucket":[res,frames,ratio],"thw":[T,H,W],"indices":[…]}; with
/// `--rank all` every rank's steps, step by step, each object starting with "rank":r. Packed
/// (`--batching packed`): "bucket" and "thw" are lists with one entry per index, and "cost"
/// is the batch's latent tokens.

#include <charconv>     // std::to_chars
#include <cstdint>      // std::uint64_t, std::uint32_t
#include <cstdio>       // std::printf, std::fputs
#include <exception>    // std::exception
#include <limits>       // std::numeric_limits
#include <optional>     // std::optional
#include <string>       // std::string
#include <string_view>  // std::string_view
#include <utility>      // std::pair
#include <vector>       // std::vector

#include "cli.hpp"
#include "mpi_job.hpp"
#include "plan_common.hpp"
#include "vbucket/plan/epoch_plan.hpp"
#include "vbucket/plan/packed_plan.hpp"

namespace vbucket::cli {
namespace {

/// plan's flags: its own, and the run spec's (plan_common.hpp).
const flag_table& plan_flags() {
  static const flag_table t = [] {
    flag_table f;
    f.field("config", true).field("meta", true);
    f.field("world", true, "number of data-parallel ranks; mpi: the number of MPI processes");
    f.field("rank", true,
            "the rank whose steps are written (0 to W-1), or all; mpi (with --world mpi): this "
            "process's rank under mpirun");
    f.field("seed", true).field("epoch", true);
    f.own({"out", "BATCHES.jsonl", true,
           "output: one JSON object per step; {rank} is replaced by the rank (not with --rank "
           "all); - is standard output (the summary then goes to standard error)"});
    f.field("drop_last");
    f.own(
        {"start-step", "K", false, "K steps of this world size are done: write steps K, K+1, ..."});
    f.own({"consumed-batches", "N", false,
           "N global batches are done (under any world size): write the rest, dealt to W ranks"});
    f.own({"state", "STATE", false,
           "resume from a state a run printed (\"vbucket-plan seed=S epoch=E consumed=N "
           "balance=G world=W fingerprint=F\"): as --consumed-batches N, refused when seed, "
           "epoch, balance group or the plan's fingerprint (metadata, config, rule, rng, "
           "policy) differ"});
    f.sampler_fields().other_fields();
    f.own({"quiet", "", false, "do not print the summary"});
    f.run_file();
    return f;
  }();
  return t;
}

constexpr std::string_view plan_description =
    "Plans one epoch: assigns every row of META.csv to a bucket, shuffles within buckets, cuts\n"
    "full batches (padding a bucket's last batch by cycling through its own samples, unless\n"
    "--policy says otherwise), orders all batches in one global sequence that does not depend\n"
    "on the world size, and deals it round robin: step k of rank r is global batch\n"
    "consumed + k*W + r. The last step is completed with repeats of whole batches (or dropped\n"
    "with --drop-last), so every rank has the same number of full steps.\n"
    "Writes {\"step\":k,\"bucket\":[res,frames,ratio],\"thw\":[T,H,W],\"indices\":[...]} per "
    "line;\nwith --rank all, every rank's, with a \"rank\" field. Steps are numbered from K with\n"
    "--start-step K, and from ceil(N/W) with --consumed-batches N. Unless --quiet, prints a\n"
    "summary, the plan's fingerprint (a 64-bit hash of the epoch's global batch sequence, the\n"
    "same on every rank and world size: compare it across ranks to check they agree) and the\n"
    "resume state after the written steps (pass it back with --state).\n"
    "Prints a warning on stderr when more than --pad-warn of the batch slots are pads.\n"
    "With --batching packed --token-budget B, every batch holds samples of any shapes whose\n"
    "latent tokens sum to at most B, packed over the whole epoch (first-fit decreasing), and\n"
    "each line is {\"step\":k,\"bucket\":[[res,frames,ratio],...],\"thw\":[[T,H,W],...],\n"
    "\"indices\":[...],\"cost\":C}: one bucket and one [T,H,W] per entry of indices.\n"
    "Under mpirun, --rank mpi --world mpi --out 'batches.{rank}.jsonl': every process plans\n"
    "alone, the processes compare their plans' fingerprints and resume positions, and each\n"
    "writes its own steps; a process that fails or computes another plan (other metadata,\n"
    "config or flags) makes every process exit 1 with one line naming the ranks. Rank 0\n"
    "prints the summary.\n"
    "With --run RUN.json the run spec's fields come from a JSON object ({\"config\": \"c.json\",\n"
    "\"meta\": \"m.csv\", \"seed\": 42, \"world\": 8, \"rank\": 0, ...}; relative paths from its\n"
    "directory); a flag given as well overrides the file's field.\n"
    "Exit codes: 0 success, 1 bad data, 2 bad usage.";

void append_number(std::string& out, std::uint64_t v) {
  char digits[24];
  const auto [end, ec] = std::to_chars(digits, digits + sizeof digits, v);
  (void)ec;  // 24 characters hold any 64-bit value
  out.append(digits, end);
}

/// `path` with every "{rank}" replaced by `rank`.
std::string rank_path(std::string path, std::uint32_t rank) {
  const std::string key = "{rank}", value = std::to_string(rank);
  std::size_t at = 0;
  while ((at = path.find(key, at)) != std::string::npos) {
    path.replace(at, key.size(), value);
    at += value.size();
  }
  return path;
}

struct plan_request {
  run_flags plan;
  std::string out_path;
  std::optional<std::uint32_t> rank;              // nullopt: all
  std::optional<std::uint64_t> start_step;        // --start-step
  std::optional<std::uint64_t> consumed_batches;  // --consumed-batches
  std::optional<plan_state> state;                // --state: checked against the plan when loaded
  std::uint64_t first_label = 0;                  // the number of the first step written
  bool quiet = false;
};

plan_request read_request(const args& a) {
  plan_request r;
  const bool all = a.has("rank") && a.value("rank") == "all";
  constexpr std::string_view rank_field[] = {"rank"};
  r.plan = read_run_flags(a, plan_flags(), all ? rank_field : std::span<const std::string_view>{});
  r.out_path = a.value("out");
  if (!all) {
    r.rank = r.plan.spec.rank;
    r.out_path = rank_path(r.out_path, *r.rank);  // as under mpirun: one file per rank
  } else if (r.out_path.find("{rank}") != std::string::npos) {
    throw usage_error("--out " + r.out_path +
                      ": {rank} names one rank's file, but --rank all writes every rank's steps "
                      "to one file (with a \"rank\" field); give a name without {rank}, or one "
                      "--rank R per file");
  }
  if (static_cast<int>(a.has("start-step")) + static_cast<int>(a.has("consumed-batches")) +
          static_cast<int>(a.has("state")) >
      1)
    throw usage_error("--start-step, --consumed-batches and --state cannot be given together");
  const std::uint64_t world = r.plan.spec.world;
  constexpr std::uint64_t u64_max = std::numeric_limits<std::uint64_t>::max();
  if (a.has("start-step")) {
    // Any count reads; one past the epoch's last step is refused once the plan is known.
    r.start_step = parse_uint_flag("start-step", a.value("start-step"), 0, u64_max);
    r.first_label = *r.start_step;
  } else if (a.has("consumed-batches")) {
    r.consumed_batches =
        parse_uint_flag("consumed-batches", a.value("consumed-batches"), 0, u64_max);
    r.first_label = *r.consumed_batches / world + (*r.consumed_batches % world != 0 ? 1 : 0);
  } else if (a.has("state")) {
    try {
      r.state = plan_state::parse(a.value("state"));
    } catch (const vbucket::error& e) {
      throw usage_error(std::string("--state: ") + e.what());
    }
    r.first_label = r.state->consumed / world + (r.state->consumed % world != 0 ? 1 : 0);
  }
  r.quiet = a.has("quiet");
  return r;
}

/// Per bucket, the constant middle of its lines: "bucket":[…],"thw":[…],"indices":[
std::vector<std::string> bucket_prefixes(const bucket_config& config) {
  std::vector<std::string> out(config.num_buckets());
  for (std::size_t b = 0; b < out.size(); ++b) {
    const auto id = static_cast<bucket_id>(b);
    const auto& frames = config.frames_of(id);
    const auto& ratio = config.ratio_of(id);
    out[b] = "\"bucket\":[" + json_string(config.resolution_of(id).info.name) + "," +
             std::to_string(frames.frames) + "," + json_string(ratio.key) + "],\"thw\":[" +
             std::to_string(frames.frames) + "," + std::to_string(ratio.height) + "," +
             std::to_string(ratio.width) + "],\"indices\":[";
  }
  return out;
}

/// Per bucket, its [res,frames,ratio] and [T,H,W] as JSON (packed lines list one per entry).
struct bucket_json {
  std::string key;
  std::string thw;
};
std::vector<bucket_json> bucket_parts(const bucket_config& config) {
  std::vector<bucket_json> out(config.num_buckets());
  for (std::size_t b = 0; b < out.size(); ++b) {
    const auto id = static_cast<bucket_id>(b);
    const auto& frames = config.frames_of(id);
    const auto& ratio = config.ratio_of(id);
    out[b].key = "[" + json_string(config.resolution_of(id).info.name) + "," +
                 std::to_string(frames.frames) + "," + json_string(ratio.key) + "]";
    out[b].thw = "[" + std::to_string(frames.frames) + "," + std::to_string(ratio.height) + "," +
                 std::to_string(ratio.width) + "]";
  }
  return out;
}

/// A cost as JSON: the shortest decimal that reads back the same double.
void append_cost(std::string& out, double v) {
  char digits[32];
  const auto [end, ec] = std::to_chars(digits, digits + sizeof digits, v);
  (void)ec;  // 32 characters hold any double
  out.append(digits, end);
}

/// Refuses --start-step K past the last step of this world, and --consumed-batches N past the
/// last position a run at this world can reach (the end of its last step: at most W - 1 past the
/// epoch's global batches, as the last step may hold alignment repeats), naming the epoch's
/// size: a position past the end would plan nothing and exit 0, which hides a wrong number.
template <class Sampler>
void check_resume_flags(const Sampler& sampler, const plan_request& r) {
  if (!r.start_step && !r.consumed_batches) return;
  const std::uint64_t batches =
      sampler.packed() ? sampler.packing().num_batches() : sampler.plan().num_batches();
  const std::uint64_t world = sampler.world_size();
  const std::uint64_t steps =
      batches / world + (!sampler.options().drop_last && batches % world != 0 ? 1 : 0);
  const std::uint64_t end = batches == 0 ? 0 : batches + (world - 1);  // no overflow: world < 2^25
  const std::string size = "epoch " + std::to_string(sampler.epoch()) + " has " +
                           std::to_string(batches) + " global batches, " + std::to_string(steps) +
                           " steps at world " + std::to_string(world);
  if (r.start_step && *r.start_step > steps)
    throw usage_error("--start-step " + std::to_string(*r.start_step) +
                      " is past the end of the epoch: " + size + " (--start-step " +
                      std::to_string(steps) + " is its end)");
  if (r.consumed_batches && *r.consumed_batches > end)
    throw usage_error("--consumed-batches " + std::to_string(*r.consumed_batches) +
                      " is past the end of the epoch: " + size + " (a run at world " +
                      std::to_string(world) + " ends at most " + std::to_string(end) +
                      " global batches in, its last step completed by repeats)");
}

/// --state with a fingerprint: refused unless it is this plan's, naming both and the inputs; a
/// state without one (written before states carried it) loads with a warning that it cannot be
/// checked.
template <class Sampler>
void check_state_fingerprint(const Sampler& sampler, const plan_request& r) {
  const plan_state& s = *r.state;
  if (!s.fingerprint) {
    const std::string line = "vbucket plan: warning: --state \"" + escape_control(s.to_string()) +
                             "\" has no fingerprint (an older state line): it cannot be checked "
                             "against this plan, so a change of the metadata, config, rule, rng "
                             "or policy since it was saved would go unnoticed\n";
    std::fputs(line.c_str(), stderr);
    return;
  }
  const std::uint64_t mine = sampler.fingerprint();
  if (*s.fingerprint == mine) return;
  throw vbucket::error(
      "--state \"" + s.to_string() + "\" was saved from a plan with fingerprint " +
      fingerprint_text(*s.fingerprint) + ", but this plan of epoch " +
      std::to_string(sampler.epoch()) + " (--meta " + r.plan.spec.meta + ", --config " +
      r.plan.spec.config + ") has fingerprint " + fingerprint_text(mine) +
      ": the metadata, config, rule, rng, seed or policy differ from the run that saved it "
      "(resuming would replay some samples and skip others); resume with the same inputs, or "
      "start the changed data as a new epoch");
}

/// Moves the sampler to where the resume flags say: --start-step K is K steps done
/// (`advance`), --consumed-batches N and --state are states to load.
template <class Sampler>
void resume(Sampler& sampler, const plan_request& r) {
  check_resume_flags(sampler, r);
  if (r.start_step) {
    sampler.advance(*r.start_step);
  } else if (r.consumed_batches) {
    plan_state s = sampler.state();  // this plan's seed, epoch and balance group
    s.consumed = *r.consumed_batches;
    sampler.load_state(s);
  } else if (r.state) {
    // The plan's own check first, for its message ("plan state ... is not for this plan").
    if (sampler.packed()) {
      (void)sampler.packing().deal(sampler.world_size(), *r.state, sampler.options().drop_last);
    } else {
      (void)sampler.plan().deal(sampler.world_size(), *r.state, sampler.options().drop_last);
    }
    check_state_fingerprint(sampler, r);
    sampler.load_state(*r.state);
  }
}

/// Writes this rank's steps (`mine`) or, with --rank all, every rank's (`all()`, the schedule),
/// step by step, one JSON object per line — {"rank":r,"step":k then what `fields(buffer, b,
/// flush)` appends, "}" — to `out` (opened before planning), and commits it. The one writer of
/// fixed and packed lines.
template <class Steps, class All, class Fields>
void write_lines(const plan_request& r, const Steps& mine, All&& all, output_file& out,
                 Fields&& fields) {
  std::string buffer;
  constexpr std::size_t flush_at = std::size_t{1} << 20;
  buffer.reserve(flush_at + 4096);
  auto flush = [&] {
    if (buffer.size() < flush_at) return;
    out.write(buffer);
    buffer.clear();
  };
  auto write_one = [&](std::uint64_t k, const auto& b, std::uint32_t rank, bool with_rank) {
    buffer.push_back('{');
    if (with_rank) {
      buffer += "\"rank\":";
      append_number(buffer, rank);
      buffer.push_back(',');
    }
    buffer += "\"step\":";
    append_number(buffer, r.first_label + k);
    fields(buffer, b, flush);
    buffer += "}\n";
    flush();
  };
  if (r.rank) {
    std::uint64_t k = 0;
    for (const auto& b : mine) write_one(k++, b, *r.rank, false);
  } else {
    const auto& s = all();
    for (std::uint64_t k = 0; k < s.steps(); ++k)
      for (std::uint32_t rank = 0; rank < s.world_size(); ++rank)
        write_one(k, s.at(k, rank), rank, true);
  }
  out.write(buffer);
  out.commit();
}

/// Writes the batches of a fixed sampler: ,"bucket":[res,frames,ratio],"thw":[T,H,W],
/// "indices":[...] per line.
void write_batches(const plan_request& r, const any_sampler& sampler, output_file& out) {
  const std::vector<std::string> prefixes = bucket_prefixes(sampler.config());
  write_lines(
      r, sampler.batches(), [&]() -> const epoch_schedule& { return sampler.schedule(); }, out,
      [&](std::string& buffer, const batch& b, auto& flush) {
        buffer.push_back(',');
        buffer += prefixes[static_cast<std::size_t>(b.bucket)];
        for (std::size_t i = 0; i < b.indices.size(); ++i) {
          if (i > 0) buffer.push_back(',');
          append_number(buffer, b.indices[i]);
          flush();
        }
        buffer.push_back(']');
      });
}

/// Writes the batches of a packing sampler: one bucket and one [T,H,W] per index, and the cost.
void write_packed_batches(const plan_request& r, const any_sampler& sampler, output_file& out) {
  const std::vector<bucket_json> parts = bucket_parts(sampler.config());
  write_lines(
      r, sampler.packed_batches(),
      [&]() -> const packed_schedule& { return sampler.packing_schedule(); }, out,
      [&](std::string& buffer, const packed_batch& b, auto& /*flush*/) {
        buffer += ",\"bucket\":[";
        for (std::size_t i = 0; i < b.size(); ++i) {
          if (i > 0) buffer.push_back(',');
          buffer += parts[static_cast<std::size_t>(b.buckets[i])].key;
        }
        buffer += "],\"thw\":[";
        for (std::size_t i = 0; i < b.size(); ++i) {
          if (i > 0) buffer.push_back(',');
          buffer += parts[static_cast<std::size_t>(b.buckets[i])].thw;
        }
        buffer += "],\"indices\":[";
        for (std::size_t i = 0; i < b.size(); ++i) {
          if (i > 0) buffer.push_back(',');
          append_number(buffer, b.indices[i]);
        }
        buffer += "],\"cost\":";
        append_cost(buffer, b.cost);
      });
}

/// The summary lines every plan shares, fixed or packed: fingerprint, the deal, the resume
/// state after it.
template <class Sampler, class Schedule>
void print_deal_summary(const plan_request& r, const Sampler& sampler, const Schedule& s) {
  std::printf("fingerprint %s (the epoch's global batch sequence: the same on every rank)\n",
              fingerprint_text(sampler.fingerprint()).c_str());
  const std::string who = r.rank ? "rank " + std::to_string(*r.rank) : std::string("all ranks");
  std::printf(
      "world %u, %s: %llu steps from step %llu (%llu global batches consumed before); "
      "rank alignment: %llu repeated batches (%llu samples), %llu dropped batches (%llu "
      "samples)\n",
      s.world_size(), who.c_str(), static_cast<unsigned long long>(s.steps()),
      static_cast<unsigned long long>(r.first_label), static_cast<unsigned long long>(s.consumed()),
      static_cast<unsigned long long>(s.repeat_batches()),
      static_cast<unsigned long long>(s.repeat_samples()),
      static_cast<unsigned long long>(s.dropped_batches()),
      static_cast<unsigned long long>(s.dropped_samples()));
  std::printf("resume state after these steps: %s\n",
              // advanced, not state_after: after a change of world size the last step may end
              // up to W - 1 batches past the global batches, a position state_after refuses.
              sampler.state().advanced(s.steps(), s.world_size()).to_string().c_str());
}

/// As `print_summary`, for a packing sampler.
template <class Sampler>
void print_packed_summary(const plan_request& r, const Sampler& sampler) {
  const packed_schedule& s = sampler.packing_schedule();
  const packed_stats st = compute_packed_stats(s);
  char fill[32];
  std::snprintf(fill, sizeof fill, "%.4f", st.fill);
  std::printf(
      "epoch %llu: %llu samples, %llu packed into %llu batches of at most %s latent tokens "
      "(%llu dropped in disabled buckets, %llu oversized dropped; fill %s)\n",
      static_cast<unsigned long long>(sampler.epoch()),
      static_cast<unsigned long long>(sampler.num_samples()),
      static_cast<unsigned long long>(st.samples), static_cast<unsigned long long>(st.batches),
      detail::format_cost(st.budget).c_str(), static_cast<unsigned long long>(st.dropped_disabled),
      static_cast<unsigned long long>(st.dropped_oversized), fill);
  print_deal_summary(r, sampler, s);
}

template <class Sampler>
void print_summary(const plan_request& r, const Sampler& sampler) {
  const epoch_schedule& s = sampler.schedule();
  const plan_counts total = sampler.stats().total;
  std::printf(
      "epoch %llu: %llu samples, %llu in buckets, %llu batches (policy %s: %llu pads, "
      "%llu dropped, %llu moved down)\n",
      static_cast<unsigned long long>(sampler.epoch()),
      static_cast<unsigned long long>(sampler.num_samples()),
      static_cast<unsigned long long>(total.grouped),
      static_cast<unsigned long long>(sampler.plan().num_batches()),
      std::string(policy_name(sampler.options().policy)).c_str(),
      static_cast<unsigned long long>(total.pads), static_cast<unsigned long long>(total.dropped),
      static_cast<unsigned long long>(total.moved_out));
  print_deal_summary(r, sampler, s);
}

}  // namespace

namespace {

#if VBUCKET_CLI_HAS_MPI

/// argv with "--rank mpi" and "--world mpi" (or --x=mpi) replaced by this process's numbers.
std::vector<std::string> with_mpi_numbers(int argc, char** argv, std::uint32_t rank,
                                          std::uint32_t world) {
  std::vector<std::string> out(argv, argv + argc);
  for (std::size_t i = 1; i < out.size(); ++i) {
    for (const auto& [name, number] :
         {std::pair<std::string, std::uint32_t>{"--rank", rank}, {"--world", world}}) {
      if (out[i] == name + "=mpi") out[i] = name + "=" + std::to_string(number);
      if (out[i] == name && i + 1 < out.size() && out[i + 1] == "mpi")
        out[i + 1] = std::to_string(number);
    }
  }
  return out;
}

/// `vbucket plan --rank mpi --world mpi`: every step that can fail on one rank only (flags,
/// config, metadata, resume) runs before the agreement, which every rank reaches, failed or
/// not; so no rank waits for one that has given up.
int plan_mpi(int argc, char** argv) {
  const mpi::communicator comm;
  const std::uint32_t me = comm.rank(), world = comm.size();
  bool agreed = false;
  try {
    std::vector<std::string> words = with_mpi_numbers(argc, argv, me, world);
    std::vector<char*> pointers;
    for (std::string& w : words) pointers.push_back(w.data());
    const args a =
        args::parse(static_cast<int>(pointers.size()), pointers.data(), plan_flags().flags());
    if (!flag_is_mpi(argc, argv, "rank") || !flag_is_mpi(argc, argv, "world"))
      throw usage_error(
          "--rank mpi and --world mpi go together (the rank and the world size "
          "both come from MPI)");
    const plan_request r = read_request(a);  // its out_path has {rank} replaced
    if (world > 1 && a.value("out").find("{rank}") == std::string::npos)
      throw usage_error("--out " + a.value("out") +
                        ": with --rank mpi each rank writes its own file; put {rank} in the "
                        "name (e.g. 'batches.{rank}.jsonl')");
    output_file out(r.out_path);  // before planning: an unwritable path fails at once
    {
      const std::unique_ptr<any_sampler> owned = make_sampler(r.plan.spec);
      any_sampler& sampler = *owned;
      resume(sampler, r);
      const std::uint64_t fingerprint = sampler.fingerprint();
      const std::uint64_t consumed = sampler.state().consumed;
      agreed = true;  // from here on every rank is in the agreement
      mpi::agree(comm, fingerprint, "plan fingerprint");
      mpi::agree(comm, consumed, "resume position (global batches consumed)");
      if (sampler.packed()) {
        write_packed_batches(r, sampler, out);
      } else {
        write_batches(r, sampler, out);
      }
      if (me == 0) {
        if (!sampler.packed()) warn_pads("plan", sampler.plan(), sampler.config(), r.plan.pad_warn);
        if (!r.quiet) {
          if (sampler.packed()) {
            print_packed_summary(r, sampler);
          } else {
            print_summary(r, sampler);
          }
          std::printf("mpi: %u ranks agree on the plan; each wrote its own steps to %s\n", world,
                      escape_control(a.value("out")).c_str());
        }
      }
      std::fflush(stdout);
      return exit_ok;
    }
  } catch (const std::exception& e) {
    if (agreed) throw;
    // This rank failed before the agreement: join it as failed, so that every rank throws the
    // same line; a usage error stays one here (exit 2), the other ranks exit 1.
    const bool usage = dynamic_cast<const usage_error*>(&e) != nullptr;
    try {
      mpi::agree_failed(comm, e.what(), "plan fingerprint");
    } catch (const vbucket::error& all) {
      if (usage) throw usage_error(all.what());
      throw;
    }
  }
}
#endif

}  // namespace

// A run file with "sources" or "stages" is a run plan (tools/vbucket/run_plan_cmd.cpp).
bool is_run_plan_invocation(int argc, char** argv);
int cmd_run_plan(int argc, char** argv);

int cmd_plan(int argc, char** argv) {
  if (is_run_plan_invocation(argc, argv)) return cmd_run_plan(argc, argv);
  const bool help = [&] {
    for (int i = 1; i < argc; ++i)
      if (std::string_view(argv[i]) == "--help" || std::string_view(argv[i]) == "-h") return true;
    return false;
  }();
  if (!help && (flag_is_mpi(argc, argv, "rank") || flag_is_mpi(argc, argv, "world"))) {
#if VBUCKET_CLI_HAS_MPI
    // MPI ends (MPI_Finalize, a barrier) only once every rank has printed its error line: the
    // launcher may end the whole job as soon as one process exits non-zero.
    const mpi::environment env;
    return run_main("plan", [&] { return plan_mpi(argc, argv); });
#else
    return run_main("plan", [&]() -> int {
      throw usage_error(
          "--rank mpi / --world mpi: this vbucket was built without MPI "
          "(VBUCKET_MPI=OFF; Debian: libopenmpi-dev)");
    });
#endif
  }
  return run_main("plan", [&] {
    const args a = args::parse(argc, argv, plan_flags().flags());
    if (a.help()) {
      std::fputs(usage_text("plan", plan_description, plan_flags().flags()).c_str(), stdout);
      return exit_ok;
    }
    const plan_request r = read_request(a);
    output_file out(r.out_path);  // before planning: an unwritable path fails at once
    // With --rank all, rank 0's sampler: the batches come from its schedule (every rank's).
    run_spec spec = r.plan.spec;
    if (!r.rank) spec.rank = 0;
    const std::unique_ptr<any_sampler> owned = make_sampler(spec);
    any_sampler& sampler = *owned;
    {
      resume(sampler, r);
      if (sampler.packed()) {
        write_packed_batches(r, sampler, out);
        if (!r.quiet) {
          print_packed_summary(r, sampler);
          std::fflush(stdout);
        }
        return exit_ok;
      }
      write_batches(r, sampler, out);
      // Only once the output is written, so that an error stays the one line on stderr.
      warn_pads("plan", sampler.plan(), sampler.config(), r.plan.pad_warn);
      if (!r.quiet) {
        print_summary(r, sampler);
        std::fflush(stdout);
      }
      return exit_ok;
    }
  });
}

}  // namespace vbucket::cli
