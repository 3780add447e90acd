#include "search/autotune/autotune_proposer.hpp"

#include <algorithm>
#include <mutex>
#include <set>
#include <unordered_set>

#include "core/hash.hpp"

namespace autocomp::search::autotune {

namespace {

// Fisher-Yates driven by derive_seed, so the order is the same on every platform and run.
template <class T>
void seeded_shuffle(std::vector<T>& items, std::uint64_t seed, std::uint64_t tier) {
  for (std::size_t i = items.size(); i > 1; --i) {
    std::uint64_t draw = engine::derive_seed(seed, {tier, static_cast<std::uint64_t>(i)});
    std::size_t j = static_cast<std::size_t>(draw % i);
    std::swap(items[i - 1], items[j]);
  }
}

// Values of `knob` at distance `distance` from its current one: the next, then the previous.
std::vector<std::size_t> values_at(const Knob& knob, std::size_t distance) {
  std::vector<std::size_t> found;
  if (!knob.current_index) {
    if (distance == 1) {
      for (std::size_t v = 0; v < knob.values.size(); ++v) {
        found.push_back(v);
      }
    }
    return found;
  }
  std::size_t current = *knob.current_index;
  if (current + distance < knob.values.size()) {
    found.push_back(current + distance);
  }
  if (current >= distance) {
    found.push_back(current - distance);
  }
  return found;
}

std::string describe(const std::vector<Knob>& knobs, const TuneStep& step) {
  std::string text = "autotune: ";
  for (std::size_t i = 0; i < step.edits.size(); ++i) {
    const Knob& knob = knobs[step.edits[i].knob];
    text += (i == 0 ? "" : ", ") + knob.name + " " + knob.current + " -> " +
            knob.values[step.edits[i].value];
  }
  return text;
}

engine::Origin origin_of(int iteration, int member, const TuneStep& step) {
  engine::Origin origin;
  origin.iteration = iteration;
  origin.member = member;
  origin.proposer = "autotune";
  const KnobEdit& first = step.edits[0];
  if (step.edits.size() == 1) {
    origin.plan = static_cast<int>(first.knob) + 1;
    origin.impl = static_cast<int>(first.value) + 1;
  } else {
    const KnobEdit& second = step.edits[1];
    origin.plan = 1000 * (static_cast<int>(first.knob) + 1) + static_cast<int>(second.knob) + 1;
    origin.impl = 1000 * (static_cast<int>(first.value) + 1) + static_cast<int>(second.value) + 1;
  }
  return origin;
}

class AutotuneProposer : public engine::Proposer {
 public:
  std::string name() const override { return "autotune"; }

  void propose(const engine::ProposeContext& ctx, const std::vector<engine::Parent>& parents,
               const engine::ChildSink& sink) override {
    int cap = k_max_children;
    std::uint64_t run_seed = 0;
    if (ctx.config != nullptr) {
      cap = std::clamp(ctx.config->plans * ctx.config->impls, 1, k_max_children);
      run_seed = ctx.config->seed;
    }
    // Parents first: a child equal to any beam member is not worth an evaluation.
    {
      std::lock_guard lock(m_mutex);
      for (const auto& parent : parents) {
        if (parent.candidate != nullptr) {
          m_seen.insert(core::source_key(parent.candidate->source));
        }
      }
    }
    for (const auto& parent : parents) {
      if (parent.candidate == nullptr) {
        continue;
      }
      const std::string& source = parent.candidate->source;
      std::vector<Knob> knobs = parse_knobs(source);
      if (knobs.empty()) {
        continue;
      }
      std::uint64_t seed = engine::derive_seed(
          run_seed,
          {static_cast<std::uint64_t>(ctx.iteration), static_cast<std::uint64_t>(parent.member)});
      int made = 0;
      for (const TuneStep& step : plan_steps(knobs, seed)) {
        if (made >= cap || (ctx.stop != nullptr && ctx.stop->stopping())) {
          break;
        }
        std::string child = source;
        // Edits apply from the last knob in the source to the first, so earlier offsets hold.
        std::vector<KnobEdit> edits = step.edits;
        std::sort(edits.begin(), edits.end(), [&](const KnobEdit& a, const KnobEdit& b) {
          return knobs[a.knob].value_offset > knobs[b.knob].value_offset;
        });
        bool ok = true;
        for (const KnobEdit& edit : edits) {
          auto edited = set_knob(child, knobs[edit.knob], knobs[edit.knob].values[edit.value]);
          if (!edited) {
            ok = false;
            break;
          }
          child = std::move(edited.value());
        }
        if (!ok || child == source) {
          continue;
        }
        {
          std::lock_guard lock(m_mutex);
          if (!m_seen.insert(core::source_key(child)).second) {
            continue;
          }
        }
        engine::Proposal proposal;
        proposal.origin = origin_of(ctx.iteration, parent.member, step);
        proposal.parent_key = parent.candidate->key;
        proposal.plan = describe(knobs, step);
        proposal.source = std::move(child);
        sink(std::move(proposal));
        ++made;
      }
    }
  }

 private:
  std::mutex m_mutex;
  std::unordered_set<std::string> m_seen;  // source keys of parents and children of this run
};

}  // namespace

std::vector<TuneStep> plan_steps(const std::vector<Knob>& knobs, std::uint64_t shuffle_seed) {
  std::vector<TuneStep> steps;
  std::vector<TuneStep> near;
  for (std::size_t k = 0; k < knobs.size(); ++k) {
    for (std::size_t v : values_at(knobs[k], 1)) {
      near.push_back({{{k, v}}});
    }
  }
  seeded_shuffle(near, shuffle_seed, 1);
  steps = near;

  std::vector<TuneStep> pairs;
  for (std::size_t a = 0; a < knobs.size(); ++a) {
    for (std::size_t b = a + 1; b < knobs.size(); ++b) {
      for (std::size_t va : values_at(knobs[a], 1)) {
        for (std::size_t vb : values_at(knobs[b], 1)) {
          pairs.push_back({{{a, va}, {b, vb}}});
        }
      }
    }
  }
  seeded_shuffle(pairs, shuffle_seed, 2);
  if (pairs.size() > static_cast<std::size_t>(k_max_pair_children)) {
    pairs.resize(k_max_pair_children);
  }
  steps.insert(steps.end(), pairs.begin(), pairs.end());

  std::size_t longest = 0;
  for (const auto& knob : knobs) {
    longest = std::max(longest, knob.values.size());
  }
  for (std::size_t distance = 2; distance < longest; ++distance) {
    for (std::size_t k = 0; k < knobs.size(); ++k) {
      for (std::size_t v : values_at(knobs[k], distance)) {
        steps.push_back({{{k, v}}});
      }
    }
  }
  return steps;
}

std::unique_ptr<engine::Proposer> make_autotune_proposer() {
  return std::make_unique<AutotuneProposer>();
}

}  // namespace autocomp::search::autotune
