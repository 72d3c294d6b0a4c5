// `flaxpp generate CHECKPOINT --prompt TEXT [--tokens N] [--temperature T] [--seed S] ...`: samples
// text from a language model `flaxpp train` trained (kind "lm"): the model and its characters
// come from the run.json and vocab.json beside the checkpoint. Character i is
// jax.random.categorical(fold_in(key(seed), i), logits / T) of the last position's logits, drawn
// on the model's device, the model reading at most the last seq_len characters; temperature 0
// takes the most likely one. While the text fits seq_len, the model's autoregressive cache
// (cli/lm_sampler.hpp) makes each character one position's work.
#include <chrono>
#include <cmath>
#include <iostream>
#include <limits>
#include <optional>

#include "cli/args.hpp"
#include "cli/commands.hpp"
#include "cli/lm_sampler.hpp"
#include "cli/train_model.hpp"
#include "cli/train_run.hpp"
#include "flaxpp/io/checkpoint.hpp"
#include "flaxpp/ops/numpy.hpp"
#include "flaxpp/ops/sampling.hpp"
#include "flaxpp/random/key.hpp"
#include "flaxpp/train/fit.hpp"

namespace flaxpp::cli {
namespace {

constexpr const char* kGenerateUsage =
    "usage: flaxpp generate CHECKPOINT --prompt TEXT [--tokens N] [--temperature T] [--seed S]\n"
    "                       [--no-kv-cache] [--timing]\n"
    "  Samples N characters (default 200) following TEXT from the language model whose\n"
    "  checkpoint `flaxpp train` wrote (a config with \"kind\": \"lm\", e.g. examples/lm.json);\n"
    "  run.json and vocab.json must sit beside the checkpoint. Prints TEXT and the sample.\n"
    "  --temperature T  divides the logits before sampling (default 1; 0: the most likely\n"
    "                   character each time)\n"
    "  --seed S         the sampling key, jax.random.key(S) (default 0); the same seed gives\n"
    "                   the same text\n"
    "  --no-kv-cache    run the model over the whole window for every character instead of\n"
    "                   keeping its keys and values (the same text, slower; the cache only\n"
    "                   holds while the text fits the model's seq_len positions: beyond, every\n"
    "                   character runs the last seq_len characters again either way)\n"
    "  --timing         print on stderr how long the sampling took (after loading), and its\n"
    "                   characters per second\n";

struct Options {
  std::string checkpoint, prompt;
  bool has_prompt = false;
  std::int64_t tokens = 200;
  double temperature = 1.0;
  std::int64_t seed = 0;
  bool kv_cache = true;
  bool timing = false;
};

double parse_temperature(const std::string& value) {
  std::size_t used = 0;
  double t = -1;
  try {
    t = std::stod(value, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  if (used != value.size() || !(t >= 0) || !std::isfinite(t))
    throw UsageError(detail::str("--temperature: expected a number >= 0, got \"", value, "\""));
  return t;
}

std::optional<Options> parse_options(const std::vector<std::string>& args) {
  Options o;
  for (std::size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    if (a == "--help" || a == "-h") {
      std::cout << kGenerateUsage;
      return std::nullopt;
    } else if (a == "--prompt") {
      o.prompt = option_value(args, i);
      o.has_prompt = true;
    } else if (a == "--tokens") {
      o.tokens = parse_int_option("--tokens", option_value(args, i), 0, 1'000'000);
    } else if (a == "--temperature") {
      o.temperature = parse_temperature(option_value(args, i));
    } else if (a == "--seed") {
      o.seed = parse_int_option("--seed", option_value(args, i),
                                std::numeric_limits<std::int64_t>::min(),
                                std::numeric_limits<std::int64_t>::max());
    } else if (a == "--no-kv-cache") {
      o.kv_cache = false;
    } else if (a == "--timing") {
      o.timing = true;
    } else if (a.starts_with("-")) {
      throw UsageError(detail::str("unknown option ", a));
    } else if (o.checkpoint.empty()) {
      o.checkpoint = a;
    } else {
      throw UsageError(detail::str("expected one checkpoint, got a second: ", a));
    }
  }
  if (o.checkpoint.empty()) throw UsageError("expected a checkpoint file");
  if (!o.has_prompt || o.prompt.empty())
    throw UsageError("expected --prompt TEXT with at least one character to continue");
  return o;
}

// `text` with control characters and non-ASCII bytes written as C escapes, for a message.
std::string printable(std::string_view text) {
  std::string out;
  for (const char ch : text) {
    const auto b = static_cast<unsigned char>(ch);
    if (ch == '\n') {
      out += "\\n";
    } else if (ch == '\t') {
      out += "\\t";
    } else if (ch == '\\' || ch == '"') {
      out += std::string{'\\', ch};
    } else if (b < 0x20 || b >= 0x7f) {
      static constexpr char kHex[] = "0123456789abcdef";
      out += std::string{'\\', 'x', kHex[b >> 4], kHex[b & 15]};
    } else {
      out.push_back(ch);
    }
  }
  return out;
}

}  // namespace

int generate_command(const std::vector<std::string>& args) {
  const std::optional<Options> o = parse_options(args);
  if (!o) return 0;
  const LmRun run = read_lm_run(o->checkpoint);
  std::array<std::int32_t, 256> id;
  id.fill(-1);
  for (std::size_t k = 0; k < run.vocab.size(); ++k)
    id[static_cast<unsigned char>(run.vocab[k])] = static_cast<std::int32_t>(k);
  std::vector<std::int32_t> tokens;
  for (const char ch : o->prompt) {
    if (id[static_cast<unsigned char>(ch)] < 0)
      throw UsageError(detail::str("--prompt: the character '", printable(std::string(1, ch)),
                                   "' (byte ", static_cast<int>(static_cast<unsigned char>(ch)),
                                   ") is not in the model's vocabulary of ", run.vocab.size(),
                                   " characters, which its training text fixed: \"",
                                   printable(run.vocab), "\""));
    tokens.push_back(id[static_cast<unsigned char>(ch)]);
  }
  const train::TrainState state = train::TrainState::from_tree(io::load_checkpoint(o->checkpoint));
  // A run with a remat policy names its layers ScanCheckpointBlock_0 (Flax's naming, which the
  // policy's presence changes but not its choice); the checkpoint says which it was.
  io::TrainConfig::Model lm = run.config.model;
  if (state.params.find(std::vector<std::string>{"Stack_0", "ScanCheckpointBlock_0"}) != nullptr)
    lm.policy = checkpoint_policies::nothing_saveable();
  nn::LanguageModel model =
      language_model(lm, run.config.data.seq_len, static_cast<std::int64_t>(run.vocab.size()));
  model.decode = o->kv_cache;
  // One init gives the parameters' structure, which the checkpoint must have, and with the
  // cache, the empty cache of a full-length row.
  nn::Variables made =
      nn::Model(model).init(random::key(0), zeros(Shape{1, model.max_len}, DType::i32));
  // What cannot be sampled from is refused, naming the file: parameters of another model (a
  // vocab.json of another size, a checkpoint of another run) or that are not finite.
  if (const auto why = tree_difference(made["params"], state.params, "params",
                                       "the language model of its run.json and vocab.json"))
    throw ParseError(
        detail::str(o->checkpoint, ": not the model its run.json and vocab.json describe: ", *why,
                    "; keep a checkpoint with the run.json and vocab.json its training wrote"));
  if (const auto path = train::first_nonfinite(state.params))
    throw ParseError(detail::str(o->checkpoint, ": the parameter params/", *path,
                                 " holds a NaN or an infinity, so the model samples nothing "
                                 "meaningful; use an earlier checkpoint, or train again with a "
                                 "lower learning rate"));
  LmSampler sampler(model,
                    tree_map(state.params, [](const Array& a) { return a.to(default_device()); }),
                    model.decode ? made["cache"] : Tree());
  const random::Key key = random::key(o->seed);
  std::string text = o->prompt;
  const auto start = std::chrono::steady_clock::now();
  for (std::int64_t k = 0; k < o->tokens; ++k) {
    // The last position's logits, sampled where they are: one int32 comes back to the host.
    const Array logits = sampler.next_logits(tokens);
    const Array drawn =
        o->temperature == 0
            ? argmax(logits, -1)
            : random::categorical(random::fold_in(key, static_cast<std::uint32_t>(k)),
                                  logits / o->temperature);
    const auto next = static_cast<std::size_t>(drawn.item<std::int32_t>());
    tokens.push_back(static_cast<std::int32_t>(next));
    text.push_back(run.vocab[next]);
  }
  if (o->timing) {
    const double seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    std::cerr << detail::str("sampled ", o->tokens, " characters in ", seconds, " s (",
                             seconds > 0 ? static_cast<double>(o->tokens) / seconds : 0.0,
                             " characters/s, ", o->kv_cache ? "with" : "without",
                             " the key-value cache)\n");
  }
  std::cout << text << std::endl;
  return 0;
}

}  // namespace flaxpp::cli
