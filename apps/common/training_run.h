// The training run every training app shares. An app declares its own options, loads its
// data, builds its model, loss and graph::Trainer, and hands the run its hooks: how to
// evaluate, how to write the model and its config, and what to draw and report at the end.
// The run owns the rest, written once:
//   the shared options   length (--epochs or --steps), --lr, --schedule, --warmup,
//                        --weight-decay, --clip, --seed, --out, --resume, --stop-at,
//                        --eval-every, --log-every, --save-every, --profile, --log-memory,
//                        --json and the device options, with each app's defaults;
//   the loop             the rows of every step, the loss read back every 10th step of an
//                        epoch and at every log line, a progress bar inside long epochs, a
//                        line per logged unit, and a stop at the first non-finite loss;
//   the checkpoint       the training state (what --resume continues from), the app's model
//                        and config as one bundle (io/bundle.h: all of a save or none),
//                        and the curves, every --save-every units and at the end; a picture
//                        that cannot be written is a warning and exit status 1, not a lost run;
//   the end              the summary, the profile and the --json line.
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "common/cli.h"
#include "common/plot.h"
#include "vkgrad/io/json_io.h"
#include "vkgrad/io/safetensors.h"
#include "vkgrad/training/trainer.h"
#include "vkgrad/vk/context.h"

namespace vkgrad::apps {

// How each step's rows are picked from the trainer's N rows, and so what a unit of training is.
enum class Rows {
  Shuffled,  // an epoch: every row once, batch by batch, in an order reshuffled each epoch
  Random,    // a step: `batch` rows drawn at random, with replacement
  All,       // an epoch of full-batch training: one step over every row (the batch is N)
};

// The shared options' defaults (each app its own) and what its unit of training is.
struct RunDefaults {
  const char* program;  // "vkgrad-vit": the training state and the messages name it
  Rows rows = Rows::Shuffled;
  const char* length = "10";          // --epochs, or --steps for Rows::Random
  const char* lr = "1e-3";            // the peak learning rate of AdamW
  const char* schedule = "constant";  // or "cosine": a linear warm-up, then a cosine decay
  const char* warmup = "0";           // steps of the warm-up
  float final_lr_divisor = 10;        // the cosine decays to lr / this
  const char* weight_decay = "0";     // decoupled, on matrices only
  const char* clip = "0";             // the gradients' global norm limit (0: none)
  const char* eval_every = "1";       // in units; 0: only at the end
  const char* log_every = "1";
  const char* save_every = "1";  // 0: only at the end
  const char* out = "out";
  bool blocks = false;  // the model's blocks are recomputed segments: --recompute is offered
};

// Means of what the trainer read back since the last log line.
struct TrainStats {
  double loss = 0;
  std::vector<double> metrics;  // the loss function's marked metrics, RunHooks::metrics order
};

// What an app brings to the run.
struct RunHooks {
  std::string data;                  // the data's fingerprint(): --resume refuses other data
  const char* items = "";            // what a step processes ("tokens"), for the rate; "": none
  int64_t items_per_step = 0;        // e.g. batch * context
  const char* rate_key = "";         // the rate's --json key ("tokens_per_s")
  std::vector<std::string> metrics;  // names of the loss function's marked metrics
  bool plot_loss = true;             // draw the training loss (otherwise only the metrics)
  std::vector<Series*> curves;       // the app's own (evaluation) curves, kept in the state
  std::string curves_file = "curves.png";
  PlotOptions plot;             // the curves' picture
  bool evaluate_first = false;  // evaluate before the first step of a new run
  // After unit `unit` (0: before training) has trained: evaluates, adds to the app's
  // curves, and returns the log line's part ("test accuracy 81.20%").
  std::function<std::string(int64_t unit, const TrainStats& train)> evaluate;
  // Writes the model and its config into dir; returns the names of the files written.
  std::function<std::vector<std::string>(const std::filesystem::path& dir, int64_t unit)> save;
  // After the last unit and the final save: the app's pictures and result lines. Adds its
  // results to the --json line; returns the names of the files written.
  std::function<std::vector<std::string>(graph::Json& json)> finish;
};

class TrainingRun {
 public:
  // Declares the shared options on cli (before cli.parse()).
  TrainingRun(Cli& cli, const RunDefaults& defaults);
  ~TrainingRun();
  TrainingRun(const TrainingRun&) = delete;
  TrainingRun& operator=(const TrainingRun&) = delete;

  // Right after cli.parse(). With --resume DIR: reads DIR's training state and takes its
  // options into cli; `fixed` names the app's options that define the run (data, model,
  // batch), which a resumed run keeps. UsageError for a bad shared option.
  void parsed(const std::vector<const char*>& fixed);
  // The device, opened once the output directory is ready (a run must not end unable to
  // save what it learned).
  vk::Context& device();

  // The trainer's options for `rows` rows in batches of `batch` (ignored for Rows::All):
  // batch, schedule over the whole run, weight decay, clipping, seed, profile. UsageError
  // when an epoch would need more rows than there are.
  graph::TrainerOptions trainerOptions(int64_t batch, int64_t rows);
  // Trains with hooks from where the run stands (a new run or --resume) to the last unit or
  // --stop-at; returns the process's exit status. Throws Error on a non-finite loss, with
  // nothing written after the last checkpoint.
  int train(graph::Trainer& trainer, RunHooks& hooks);

  uint64_t seed() const { return seed_; }
  float peakLr() const { return lr_; }
  const char* unit() const;  // "epoch" or "step"
  int64_t units() const { return units_; }
  int64_t accumulate() const { return accumulate_; }  // --accumulate (1 where not offered)
  const std::filesystem::path& out() const { return out_; }
  float lastLoss() const { return last_loss_; }  // NaN before the first read
  graph::Precision precision() const { return precision_; }
  // --save-dtype: what the app's model file is written in (ParameterStore::save).
  ops::DType modelDtype() const { return model_dtype_; }
  double evalSeconds() const { return eval_seconds_; }
  int64_t evaluations() const { return evaluations_; }

 private:
  struct Loop;
  Loop startLoop(RunHooks& hooks) const;
  int64_t resume(graph::Trainer& trainer, Loop& loop);
  // One unit's steps; `log`: its last step reads the loss back for the line.
  void trainUnit(graph::Trainer& trainer, Loop& loop, int64_t unit, bool log);
  // The curves' points, the evaluation when `eval`, and the progress line.
  void logUnit(graph::Trainer& trainer, Loop& loop, int64_t unit, bool eval);
  std::string evaluate(Loop& loop, int64_t unit, const TrainStats& stats);
  void save(graph::Trainer& trainer, Loop& loop, int64_t unit);
  // Runs draw; a picture that cannot be written is a warning, and the run's status 1.
  void picture(const std::function<void()>& draw);
  int finish(graph::Trainer& trainer, Loop& loop);

  Cli& cli_;
  RunDefaults defaults_;
  std::optional<graph::Checkpoint> resumed_;
  std::vector<const char*> fixed_;
  int64_t accumulate_ = 1;  // --accumulate: micro-batches per step
  // The items (images, tokens) a step trains on: the app's per micro-batch, times them.
  int64_t itemsPerStep(const Loop& loop) const;
  std::unique_ptr<vk::Context> context_;
  std::filesystem::path out_;
  uint64_t seed_ = 0;
  float lr_ = 0;
  graph::Precision precision_ = graph::Precision::F32;
  ops::DType model_dtype_ = ops::DType::F32;
  int64_t units_ = 0, rows_ = 0, batch_ = 0, steps_per_unit_ = 1;
  float last_loss_;
  double eval_seconds_ = 0;
  int64_t evaluations_ = 0;
  bool picture_failed_ = false;
};

}  // namespace vkgrad::apps
