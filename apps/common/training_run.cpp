#include "common/training_run.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <numeric>
#include <random>

#include "common/device_options.h"
#include "common/output_dir.h"
#include "common/platform.h"
#include "common/progress.h"
#include "common/resume.h"
#include "vkgrad/core/error.h"
#include "vkgrad/io/bundle.h"
#include "vkgrad/runtime/profile.h"
#include "vkgrad/vk/memory.h"

namespace vkgrad::apps {
namespace {

namespace fs = std::filesystem;

// "12.3 MiB", or KiB below one MiB (a small GNN's whole footprint).
std::string bytesText(uint64_t bytes) {
  char text[32];
  if (bytes < (1u << 20))
    std::snprintf(text, sizeof text, "%.1f KiB", double(bytes) / 1024.0);
  else
    std::snprintf(text, sizeof text, "%.1f MiB", double(bytes) / 1048576.0);
  return text;
}

const char* lengthOption(Rows rows) {
  return rows == Rows::Random ? "steps" : "epochs";
}

// The options every run shares that define it (a resumed run keeps them), and its rhythm.
const char* const kSharedFixed[] = {"lr", "schedule", "warmup", "weight-decay", "clip", "seed"};

std::string statsText(const TrainStats& stats, const std::vector<std::string>& names) {
  // Nothing read back yet (the first steps of an epoch): a dash, not "nan".
  auto value = [](const char* format, double v) {
    char text[32];
    std::snprintf(text, sizeof text, format, v);
    return std::isnan(v) ? std::string("-") : std::string(text);
  };
  std::string out = "loss " + value("%.4f", stats.loss);
  for (size_t i = 0; i < names.size() && i < stats.metrics.size(); ++i)
    out += "  " + names[i] + " " + value("%.2f", stats.metrics[i]);
  return out;
}

}  // namespace

// What one call of train() keeps as it goes.
struct TrainingRun::Loop {
  RunHooks& hooks;
  Series loss;
  std::vector<Series> metrics;
  RunState state;
  std::vector<uint32_t> order;  // Shuffled: this epoch's order; All: every row
  std::vector<uint32_t> drawn;  // Random: this step's rows
  // Read back since the last log line.
  double loss_sum = 0;
  std::vector<double> metric_sums;
  int64_t reads = 0;
  int64_t steps = 0;  // steps this session took
  int64_t logged_steps = 0;
  double logged_seconds = 0;  // train_seconds at the last line
  double train_seconds = 0, gpu_ms = 0;
  Clock::time_point start;
  std::vector<std::string> saved;  // what the last save wrote besides the state and curves

  TrainStats means() const {
    TrainStats s{reads ? loss_sum / double(reads) : NAN, {}};
    for (const double m : metric_sums) s.metrics.push_back(reads ? m / double(reads) : NAN);
    return s;
  }
  std::vector<Series> plotted() const {
    std::vector<Series> out;
    if (hooks.plot_loss) out.push_back(loss);
    out.insert(out.end(), metrics.begin(), metrics.end());
    for (const Series* s : hooks.curves) out.push_back(*s);
    return out;
  }
};

TrainingRun::TrainingRun(Cli& cli, const RunDefaults& defaults)
    : cli_(cli), defaults_(defaults), last_loss_(NAN) {
  const bool steps = defaults.rows == Rows::Random;
  cli.option("out", "checkpoint directory (created if missing; with --resume: its DIR)",
             defaults.out);
  cli.option(lengthOption(defaults.rows),
             steps ? "optimizer steps" : "epochs (passes over the training rows)", defaults.length);
  cli.option("lr", "peak learning rate (AdamW)", defaults.lr);
  cli.option("schedule", "constant, or cosine (a linear warm-up, then a cosine decay)",
             defaults.schedule);
  cli.option("warmup", "warm-up steps of the cosine schedule", defaults.warmup);
  cli.option("weight-decay", "AdamW's decoupled weight decay (matrices only)",
             defaults.weight_decay);
  cli.option("clip", "clip the gradients to this global norm (0: no clipping)", defaults.clip);
  if (defaults.rows != Rows::All)
    cli.option("accumulate",
               "micro-batches of --batch rows per optimizer step, their gradients summed on the "
               "device: the step of a batch this many times larger, with one micro-batch's "
               "activation memory",
               "1");
  if (defaults.blocks)
    cli.flag("recompute",
             "keep only each block's input between the forward and the backward pass and run "
             "the block again for its gradients: less activation memory, one more forward pass "
             "of the blocks, the same results");
  cli.option("seed", "initialisation, data order and dropout seed", "1");
  cli.option("precision",
             "activations and their gradients in fp32, bf16 or fp16 (parameters, their "
             "gradients and AdamW's state stay fp32)",
             "fp32");
  cli.option("save-dtype",
             "the model file's format: fp32, or bf16/fp16 for a half-size file that sample, eval "
             "and predict load (the training state keeps fp32, for --resume)",
             "fp32");
  const std::string unit = steps ? "steps" : "epochs";
  cli.option("eval-every", unit + " between evaluations (0: only at the end)", defaults.eval_every);
  cli.option("log-every", unit + " between progress lines", defaults.log_every);
  cli.option("save-every", unit + " between checkpoints (0: only at the end)", defaults.save_every);
  declareResumeOptions(cli, steps ? "step" : "epoch");
  declareDeviceOptions(cli);
  cli.flag("profile",
           "time every node of the training step and print the last step's GPU time by op "
           "(a timestamp per node)");
  cli.flag("log-memory", "add host RSS and device memory in use to every progress line");
  cli.flag("json", "end with one JSON line of results");
}

TrainingRun::~TrainingRun() = default;

int64_t TrainingRun::itemsPerStep(const Loop& loop) const {
  return loop.hooks.items_per_step * accumulate_;
}

const char* TrainingRun::unit() const {
  return defaults_.rows == Rows::Random ? "step" : "epoch";
}

void TrainingRun::parsed(const std::vector<const char*>& fixed) {
  fixed_ = fixed;
  fixed_.insert(fixed_.end(), std::begin(kSharedFixed), std::end(kSharedFixed));
  if (defaults_.rows != Rows::All) fixed_.push_back("accumulate");
  const char* length = lengthOption(defaults_.rows);
  resumed_ = resumeRun(cli_, {fixed_, {length, "eval-every", "log-every", "save-every"}},
                       defaults_.program);
  units_ = cli_.getInt(length, 1, int64_t(1) << 40);
  seed_ = uint64_t(cli_.getInt("seed", 0, INT64_MAX));
  lr_ = float(cli_.getDouble("lr", 1e-8, 10.0));
  const std::string schedule = cli_.get("schedule");
  if (schedule != "cosine" && schedule != "constant")
    cli_.fail("--schedule must be cosine or constant");
  for (const char* every : {"eval-every", "save-every"}) cli_.getInt(every, 0, int64_t(1) << 40);
  if (defaults_.rows != Rows::All)
    accumulate_ = cli_.getInt("accumulate", 1, graph::Trainer::kMaxAccumulate);
  cli_.getInt("log-every", 1, int64_t(1) << 40);
  out_ = cli_.get("out");
  // Checked here, before the device or the data: a typo costs nothing.
  try {
    precision_ = graph::parsePrecision(cli_.get("precision"));
    const graph::Precision saved = graph::parsePrecision(cli_.get("save-dtype"));
    model_dtype_ = saved == graph::Precision::F32 ? ops::DType::F32 : graph::activationDtype(saved);
  } catch (const Error& e) {
    cli_.fail(e.what());
  }
}

vk::Context& TrainingRun::device() {
  if (!context_) {
    prepareOutput(out_);
    context_ = std::make_unique<vk::Context>(contextOptions(cli_));
  }
  return *context_;
}

graph::TrainerOptions TrainingRun::trainerOptions(int64_t batch, int64_t rows) {
  // An epoch needs a step's rows (batch times its micro-batches); random draws (with
  // replacement) do not.
  if (defaults_.rows == Rows::Shuffled && rows < batch * accumulate_)
    cli_.fail("--batch " + std::to_string(batch) +
              (accumulate_ > 1 ? " times --accumulate " + std::to_string(accumulate_) : "") +
              " is more than the " + std::to_string(rows) + " training rows");
  rows_ = rows;
  batch_ = defaults_.rows == Rows::All ? rows : batch * accumulate_;
  steps_per_unit_ = defaults_.rows == Rows::Shuffled ? rows / batch_ : 1;
  if (rows <= 0 || batch_ <= 0 || steps_per_unit_ <= 0)
    throw Error("a batch of " + std::to_string(batch_) + " from " + std::to_string(rows) +
                " rows: nothing to train on");
  const int64_t steps = units_ * steps_per_unit_;
  const float lr = lr_;
  graph::TrainerOptions options;
  options.batch = batch_ / accumulate_;
  options.accumulate = accumulate_;
  options.optimizer.adamw.weight_decay = float(cli_.getDouble("weight-decay", 0.0, 10.0));
  options.optimizer.max_grad_norm = float(cli_.getDouble("clip", 0.0, 1e6));
  options.dropout_seed = seed_;
  options.profile = cli_.has("profile");
  options.recompute = defaults_.blocks && cli_.has("recompute");
  options.precision = precision_;
  if (cli_.get("schedule") == "cosine") {
    const int64_t warmup = std::min(cli_.getInt("warmup", 0, int64_t(1) << 40), steps);
    options.schedule =
        graph::Schedule::cosine(lr, warmup, steps - warmup, lr / defaults_.final_lr_divisor);
  } else {
    options.schedule = graph::Schedule::constant(lr);
  }
  return options;
}

int64_t TrainingRun::resume(graph::Trainer& trainer, Loop& loop) {
  if (!resumed_) return 0;
  const std::string where = (fs::path(cli_.get("resume")) / kTrainStateFile).string();
  readRunState(*resumed_, where, loop.state);
  trainer.loadState(*resumed_, where);
  resumed_.reset();  // its memory
  const int64_t done = trainer.steps() / steps_per_unit_;
  if (trainer.steps() % steps_per_unit_ != 0)
    throw Error(where + ": saved at step " + std::to_string(trainer.steps()) +
                ", not at the end of an epoch of " + std::to_string(steps_per_unit_) + " steps");
  if (done >= units_)
    throw Error(where + ": the run has done " + std::to_string(done) + " of " +
                std::to_string(units_) + " " + unit() + "s: nothing to resume (a larger --" +
                lengthOption(defaults_.rows) + "?)");
  if (defaults_.rows == Rows::Shuffled) {
    // Each epoch's order is a shuffle of the last one's: replay them from the seed.
    std::mt19937_64 replay(seed_);
    for (int64_t e = 0; e < done; ++e) std::shuffle(loop.order.begin(), loop.order.end(), replay);
    if (!(replay == loop.state.rng))
      throw Error(where + ": its shuffling generator is not where " + std::to_string(done) +
                  " epochs from seed " + std::to_string(seed_) + " leave it");
  }
  std::printf("resumed after %s %lld of %lld from %s\n", unit(), static_cast<long long>(done),
              static_cast<long long>(units_), where.c_str());
  return done;
}

void TrainingRun::save(graph::Trainer& trainer, Loop& loop, int64_t unit) {
  // The state, the model and its config appear in DIR together or not at all.
  try {
    graph::BundleWriter bundle(out_);
    trainer.saveState(
        bundle.add(kTrainStateFile),
        runMetadata(
            cli_, {fixed_, {lengthOption(defaults_.rows), "eval-every", "log-every", "save-every"}},
            defaults_.program, loop.state));
    loop.saved.clear();
    if (loop.hooks.save)
      for (const std::string& name : loop.hooks.save(bundle.staging(), unit)) {
        bundle.add(name);
        loop.saved.push_back(name);
      }
    bundle.commit();
  } catch (const Error& e) {
    // The message may name a file in DIR/.pending, which the failed save removed: say what
    // DIR holds instead.
    throw Error(std::string(e.what()) + " (saving " + this->unit() + " " + std::to_string(unit) +
                " failed; " + out_.string() + " holds the last whole checkpoint, if any)");
  }
  picture([&] { writeLinePlot(out_ / loop.hooks.curves_file, loop.plotted(), loop.hooks.plot); });
}

void TrainingRun::picture(const std::function<void()>& draw) {
  try {
    draw();
  } catch (const std::exception& e) {
    std::fprintf(stderr, "%s: warning: %s (the checkpoint was saved; the run ends with status 1)\n",
                 defaults_.program, e.what());
    picture_failed_ = true;
  }
}

TrainingRun::Loop TrainingRun::startLoop(RunHooks& hooks) const {
  Loop loop{hooks, {}, {}, {std::mt19937_64(seed_), {}, hooks.data}};
  const bool sparse = defaults_.rows != Rows::Random;  // a point per epoch: draw markers
  loop.loss = {"train loss", {}, {}, {31, 119, 180}, sparse};
  for (size_t i = 0; i < hooks.metrics.size(); ++i) {
    Series s{"train " + hooks.metrics[i], {}, {}, {}, sparse};
    std::copy_n(categoricalColour(int(i) + (hooks.plot_loss ? 1 : 0)), 3, s.rgb);
    loop.metrics.push_back(s);
  }
  loop.metric_sums.assign(hooks.metrics.size(), 0.0);
  if (defaults_.rows != Rows::Random) {
    loop.order.resize(size_t(defaults_.rows == Rows::All ? batch_ : rows_));
    std::iota(loop.order.begin(), loop.order.end(), 0u);
  }
  loop.drawn.resize(size_t(batch_));
  return loop;
}

std::string TrainingRun::evaluate(Loop& loop, int64_t unit, const TrainStats& stats) {
  const auto begin = Clock::now();
  std::string text = loop.hooks.evaluate(unit, stats);
  eval_seconds_ += secondsSince(begin);
  ++evaluations_;
  return text;
}

void TrainingRun::trainUnit(graph::Trainer& trainer, Loop& loop, int64_t unit, bool log) {
  if (defaults_.rows == Rows::Shuffled)
    std::shuffle(loop.order.begin(), loop.order.end(), loop.state.rng);
  std::optional<Progress> progress;
  if (steps_per_unit_ > 1) progress.emplace(unit, units_, steps_per_unit_, loop.hooks.items);
  const auto start = Clock::now();
  for (int64_t s = 1; s <= steps_per_unit_; ++s) {
    std::span<const uint32_t> rows = loop.order;
    if (defaults_.rows == Rows::Shuffled)
      rows = rows.subspan(size_t((s - 1) * batch_), size_t(batch_));
    if (defaults_.rows == Rows::Random) {
      for (uint32_t& r : loop.drawn) r = uint32_t(loop.state.rng() % uint64_t(rows_));
      rows = loop.drawn;
    }
    // Each read waits for the device: every 10th step of an epoch and the step of a line.
    const bool read = (steps_per_unit_ > 1 && s % 10 == 0) || (s == steps_per_unit_ && log);
    const std::optional<float> l = trainer.step(rows, read);
    ++loop.steps;
    loop.gpu_ms += trainer.lastStepMilliseconds();
    if (l && !std::isfinite(*l))
      throw Error("step " + std::to_string(trainer.steps()) + ": the loss is " +
                  (std::isnan(*l) ? "NaN" : "infinite") +
                  "; training stopped and nothing more was saved (a smaller --lr?)");
    if (l) {
      last_loss_ = *l;
      loop.loss_sum += *l;
      for (size_t i = 0; i < loop.metric_sums.size(); ++i)
        loop.metric_sums[i] += trainer.metrics().at(i);
      ++loop.reads;
    }
    if (progress)
      progress->update(s, s * itemsPerStep(loop), statsText(loop.means(), loop.hooks.metrics),
                       secondsSince(start));
  }
  loop.train_seconds += secondsSince(start);
}

void TrainingRun::logUnit(graph::Trainer& trainer, Loop& loop, int64_t unit, bool eval) {
  const TrainStats stats = loop.means();
  if (loop.reads > 0) {
    loop.loss.x.push_back(double(unit));
    loop.loss.y.push_back(stats.loss);
    for (size_t i = 0; i < loop.metrics.size(); ++i) {
      loop.metrics[i].x.push_back(double(unit));
      loop.metrics[i].y.push_back(stats.metrics[i]);
    }
  }
  loop.loss_sum = 0;
  std::fill(loop.metric_sums.begin(), loop.metric_sums.end(), 0.0);
  loop.reads = 0;
  const std::string evaluated = eval ? "  " + evaluate(loop, unit, stats) : "";
  // ms/step of the steps since the last line, training alone.
  const double ms = 1000.0 * (loop.train_seconds - loop.logged_seconds) /
                    double(std::max<int64_t>(loop.steps - loop.logged_steps, 1));
  loop.logged_seconds = loop.train_seconds;
  loop.logged_steps = loop.steps;
  std::printf("%s %*lld/%lld  %s%s  %.1f ms/step", this->unit(), int(std::to_string(units_).size()),
              static_cast<long long>(unit), static_cast<long long>(units_),
              statsText(stats, loop.hooks.metrics).c_str(), evaluated.c_str(), ms);
  if (loop.hooks.items_per_step > 0)
    std::printf("  %.0f %s/s", double(itemsPerStep(loop)) * 1000.0 / ms, loop.hooks.items);
  std::printf("  lr %.2e  (%s)", double(trainer.learningRate()),
              duration(secondsSince(loop.start)).c_str());
  if (cli_.has("log-memory"))
    std::printf("  host RSS %.2f MiB  device %.2f MiB", double(residentBytes()) / 1048576.0,
                double(device().allocator().bytesInUse()) / 1048576.0);
  std::printf("\n");
  std::fflush(stdout);
}

int TrainingRun::train(graph::Trainer& trainer, RunHooks& hooks) {
  if (steps_per_unit_ <= 0 || batch_ <= 0) throw Error("TrainingRun: trainerOptions() first");
  Loop loop = startLoop(hooks);
  loop.state.curves.push_back(&loop.loss);
  for (Series& s : loop.metrics) loop.state.curves.push_back(&s);
  loop.state.curves.insert(loop.state.curves.end(), hooks.curves.begin(), hooks.curves.end());
  const int64_t done = resume(trainer, loop);
  const int64_t last = lastUnit(cli_, done, units_, unit());
  const int64_t eval_every = cli_.getInt("eval-every", 0, int64_t(1) << 40);
  const int64_t log_every = cli_.getInt("log-every", 1, int64_t(1) << 40);
  const int64_t save_every = cli_.getInt("save-every", 0, int64_t(1) << 40);
  if (done == 0 && hooks.evaluate_first && hooks.evaluate) evaluate(loop, 0, {NAN, {}});
  loop.start = Clock::now();
  for (int64_t u = done + 1; u <= last; ++u) {
    const bool eval = hooks.evaluate && ((eval_every > 0 && u % eval_every == 0) || u == units_);
    const bool log = eval || u % log_every == 0 || u == last;
    trainUnit(trainer, loop, u, log);
    if (log) logUnit(trainer, loop, u, eval);
    if (u != last && save_every > 0 && u % save_every == 0) save(trainer, loop, u);
  }
  save(trainer, loop, last);
  if (last < units_) {
    printStopped(defaults_.program, out_.string(), unit(), last, units_);
    return validationFailed(device(), defaults_.program) || picture_failed_ ? 1 : 0;
  }
  return finish(trainer, loop);
}

int TrainingRun::finish(graph::Trainer& trainer, Loop& loop) {
  vk::Context& context = device();
  const double seconds = secondsSince(loop.start);
  const double ms_per_step = 1000.0 * loop.train_seconds / double(loop.steps);
  const double rate = double(itemsPerStep(loop) * loop.steps) / loop.train_seconds;
  const uint64_t peak = context.allocator().peakBytesInUse();
  std::printf("done: %lld %ss in %s (training %.1f ms/step", static_cast<long long>(units_), unit(),
              duration(seconds).c_str(), ms_per_step);
  if (loop.hooks.items_per_step > 0) std::printf(", %.0f %s/s", rate, loop.hooks.items);
  std::printf("; evaluation %.1f s), peak device memory %s, %s activation arena %s\n",
              eval_seconds_, bytesText(peak).c_str(), graph::precisionName(precision_),
              bytesText(trainer.executor().arenaBytes()).c_str());
  graph::Json json = {{"command", "train"},
                      {"device", context.info().name},
                      {lengthOption(defaults_.rows), units_},
                      {"steps", trainer.steps()},
                      {"seconds", seconds},
                      {"train_seconds", loop.train_seconds},
                      {"eval_seconds", eval_seconds_},
                      {"ms_per_step", ms_per_step},
                      {"gpu_ms_per_step", loop.gpu_ms / double(loop.steps)},
                      {"peak_device_bytes", peak},
                      {"precision", graph::precisionName(precision_)},
                      {"accumulate", accumulate_},
                      {"recompute", defaults_.blocks && cli_.has("recompute")},
                      {"arena_bytes", trainer.executor().arenaBytes()}};
  if (loop.hooks.items_per_step > 0) json[loop.hooks.rate_key] = rate;
  if (precision_ == graph::Precision::F16) {
    const float scale = trainer.lossScale();
    const int64_t skipped = trainer.skippedSteps();
    std::printf("fp16 loss scaling: scale %g now, %lld of %lld steps skipped (overflow)\n",
                double(scale), static_cast<long long>(skipped),
                static_cast<long long>(trainer.steps()));
    json["loss_scale"] = scale;
    json["skipped_steps"] = skipped;
  }
  std::vector<std::string> files = loop.saved;
  files.push_back(loop.hooks.curves_file);
  files.push_back(kTrainStateFile);
  files.push_back(graph::kManifestFile);
  if (loop.hooks.finish)
    picture([&] {
      for (const std::string& f : loop.hooks.finish(json)) files.push_back(f);
    });
  std::string list;
  for (const std::string& f : files) list += (list.empty() ? "" : ", ") + f;
  std::printf("wrote %s/{%s}\n", out_.string().c_str(), list.c_str());
  if (cli_.has("profile"))
    std::printf("GPU time of the last training step by op (%.1f ms in all, %u dispatches):\n%s",
                trainer.lastStepMilliseconds(), trainer.executor().dispatchCount(),
                graph::formatProfile(trainer.graph(), trainer.executor().profile()).c_str());
  if (cli_.has("json")) std::printf("%s\n", graph::dumpJson(json).c_str());
  return validationFailed(context, defaults_.program) || picture_failed_ ? 1 : 0;
}

}  // namespace vkgrad::apps
