// Planning prompts on the shipped templates, for the LayerNorm seed with the profiles it really
// showed: every plan request keeps an item its profile calls for, siblings lead with different
// items, DMA items do not outrank engine items on a compute-bound kernel, cost figures agree with
// the simulator, and the profile is shown whole.
#include <gtest/gtest.h>

#include <algorithm>
#include <fstream>
#include <set>
#include <sstream>

#include "search/prompts/library.hpp"
#include "search/prompts/menu.hpp"
#include "search/prompts/problem_notes.hpp"
#include "search/prompts/prompt_builder.hpp"

namespace autocomp::search::prompts {
namespace {

std::string read_file(const std::string& relative) {
  std::ifstream in(std::string(AUTOCOMP_SOURCE_DIR) + "/" + relative);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

PromptBuilder shipped_builder(PromptBuilderOptions options = {}) {
  auto builder = PromptBuilder::open(std::string(AUTOCOMP_SOURCE_DIR) + "/prompts", options);
  EXPECT_TRUE(builder.ok()) << (builder.ok() ? "" : builder.failure().describe());
  return std::move(builder).value();
}

// The naive LayerNorm's profile: VectorE 99% busy, ScalarE idle, DMA 29%, 2 MB transfers.
std::map<std::string, double> naive_layernorm_metrics() {
  return {{"dma_active_time_percent", 28.8},
          {"dma_transfer_average_bytes", 2.114e6},
          {"dma_transfer_count", 128},
          {"gpsimd_engine_active_time_percent", 16.03},
          {"scalar_engine_active_time_percent", 0.1192},
          {"tensor_engine_active_time_percent", 0},
          {"total_instruction_count", 480},
          {"vector_engine_active_time_percent", 99.05}};
}

// After moving the statistics to ScalarE: VectorE 88%, ScalarE 53%, GpSimdE idle, DMA 62%.
constexpr const char* k_balanced_layernorm = R"(import neuronxcc.nki as nki
import neuronxcc.nki.language as nl
import neuronxcc.nki.isa as nisa

EPS = 1e-5

@nki.jit
def layernorm_kernel(input_tensor, gamma, beta):
    rows, cols = input_tensor.shape
    P = nl.tile_size.pmax
    out_tensor = nl.ndarray((rows, cols), dtype=input_tensor.dtype, buffer=nl.shared_hbm)
    gamma_b = nl.broadcast_to(nl.load(gamma.reshape((1, cols))[0:1, :]), shape=(P, cols))
    beta_b = nl.broadcast_to(nl.load(beta.reshape((1, cols))[0:1, :]), shape=(P, cols))
    for i in nl.affine_range(rows // P):
        x = nl.load(input_tensor[i * P:(i + 1) * P, :])
        sum_x = nl.ndarray((P, 1), dtype=nl.float32, buffer=nl.sbuf)
        nisa.activation_reduce(op=nl.copy, data=x, reduce_op=nl.add, reduce_res=sum_x)
        neg_mean = nisa.tensor_scalar(sum_x, nl.multiply, -1.0 / cols)
        ssq = nl.ndarray((P, 1), dtype=nl.float32, buffer=nl.sbuf)
        nisa.activation_reduce(op=nl.square, data=x, bias=neg_mean, reduce_op=nl.add,
                               reduce_res=ssq)
        var_eps = nisa.tensor_scalar(ssq, nl.multiply, 1.0 / cols, op1=nl.add, operand1=EPS)
        rstd = nl.rsqrt(var_eps)
        nbias = nl.multiply(neg_mean, rstd)
        y = nisa.activation(op=nl.copy, data=x, bias=nbias, scale=rstd)
        y = nl.multiply(y, gamma_b)
        y = nl.add(y, beta_b)
        nl.store(out_tensor[i * P:(i + 1) * P, :], value=y)
    return out_tensor
)";

std::map<std::string, double> balanced_layernorm_metrics() {
  return {{"dma_active_time_percent", 62.13},
          {"dma_transfer_average_bytes", 4.068e6},
          {"dma_transfer_count", 66},
          {"gpsimd_engine_active_time_percent", 1.107},
          {"scalar_engine_active_time_percent", 53.08},
          {"tensor_engine_active_time_percent", 0},
          {"total_instruction_count", 356},
          {"vector_engine_active_time_percent", 88.24}};
}

const std::set<std::string>& dma_items() {
  static const std::set<std::string> k_items = {
      "hoist_loads", "keep_resident",   "fuse_loops",        "double_buffer",
      "larger_dma",  "coalesce_stores", "software_pipeline", "downcast_early"};
  return k_items;
}

const std::set<std::string>& engine_items() {
  static const std::set<std::string> k_items = {"balance_engines",       "fuse_passes",
                                                "activation_fused",      "activation_reduce",
                                                "tensor_scalar_two_ops", "bn_stats"};
  return k_items;
}

PlanPromptInput naive_layernorm_input() {
  PlanPromptInput input;
  input.target = "trn2";
  input.kernel.source = read_file("seeds/layernorm/naive.py");
  input.kernel.metrics = naive_layernorm_metrics();
  input.kernel.bottleneck = "compute-bound";
  input.kernel.latency_us = 2775;
  input.rtol = 1e-4;
  input.iteration = 1;
  input.total_iterations = 2;
  return input;
}

std::vector<RankedItem> rank_on_trn2(const MenuContext& context) {
  auto library = PromptLibrary::open(std::string(AUTOCOMP_SOURCE_DIR) + "/prompts");
  EXPECT_TRUE(library.ok());
  auto menu = load_menu(library.value(), "trn2");
  EXPECT_TRUE(menu.ok());
  return rank_menu(menu->items, context);
}

TEST(PromptPlanMenu, EveryPlanRequestOfAParentKeepsAnEngineItemAndSiblingsLeadDifferently) {
  const auto builder = shipped_builder();
  auto input = naive_layernorm_input();
  input.dropout = 1.0;  // dropout keeps nothing: what remains is the guaranteed item alone
  std::set<std::string> leads;
  for (int plan = 0; plan < 4; ++plan) {
    input.plan_index = plan;
    input.seed = 100 + static_cast<std::uint64_t>(plan);
    auto prompt = builder.plan(input);
    ASSERT_TRUE(prompt.ok()) << prompt.failure().describe();
    ASSERT_EQ(prompt->menu_ids.size(), 1U) << "plan " << plan;
    const auto& id = prompt->menu_ids.front();
    EXPECT_EQ(engine_items().count(id), 1U) << "plan " << plan << " got " << id;
    leads.insert(id);
  }
  EXPECT_EQ(leads.size(), 4U) << "sibling requests lead with different items";

  input.plan_index = 0;
  auto first = builder.plan(input);
  ASSERT_TRUE(first.ok());
  EXPECT_EQ(first->menu_ids.front(), "balance_engines") << "VectorE 99%, ScalarE idle";
}

TEST(PromptPlanMenu, UnderDropoutEveryPlanRequestStillShowsAnItemTheProfileCallsFor) {
  const auto builder = shipped_builder();
  auto input = naive_layernorm_input();
  input.dropout = 0.7;
  for (std::uint64_t seed = 1; seed <= 30; ++seed) {
    for (int plan = 0; plan < 4; ++plan) {
      input.seed = seed * 7 + static_cast<std::uint64_t>(plan);
      input.plan_index = plan;
      auto prompt = builder.plan(input);
      ASSERT_TRUE(prompt.ok()) << prompt.failure().describe();
      const bool has_engine_item =
          std::any_of(prompt->menu_ids.begin(), prompt->menu_ids.end(),
                      [](const std::string& id) { return engine_items().count(id) != 0; });
      EXPECT_TRUE(has_engine_item) << "seed " << seed << " plan " << plan;
    }
  }
}

TEST(PromptPlanMenu, DmaItemsDoNotOutrankEngineItemsOnAComputeBoundKernel) {
  MenuContext naive;
  naive.bottleneck = "compute-bound";
  naive.metrics = naive_layernorm_metrics();
  naive.kernel_source = read_file("seeds/layernorm/naive.py");
  naive.rtol = 1e-4;
  MenuContext balanced = naive;
  balanced.metrics = balanced_layernorm_metrics();
  balanced.kernel_source = k_balanced_layernorm;
  for (const auto* context : {&naive, &balanced}) {
    const auto ranked = rank_on_trn2(*context);
    double best_dma = -1;
    for (const auto& entry : ranked) {
      if (dma_items().count(entry.item.id) != 0) {
        best_dma = std::max(best_dma, entry.score);
      }
    }
    const auto balance = std::find_if(ranked.begin(), ranked.end(), [](const RankedItem& r) {
      return r.item.id == "balance_engines";
    });
    ASSERT_NE(balance, ranked.end());
    EXPECT_GT(balance->score, best_dma) << "VectorE hot, another element-wise engine idle";
    EXPECT_LT(balance - ranked.begin(), 3) << "balance_engines among the first three";
  }
}

TEST(PromptPlanMenu, ElementWiseCostsAgreeWithTheSimulatorAndDmaLatencyIsOneFigure) {
  const auto builder = shipped_builder();
  auto input = naive_layernorm_input();
  input.kernel.source +=
      "\n# also: nisa.dma_copy(dst=t, src=x); nisa.tensor_tensor(t, t, np.add)\n";
  input.plan_index = 0;
  auto prompt = builder.plan(input);
  ASSERT_TRUE(prompt.ok()) << prompt.failure().describe();
  const auto& text = prompt->request.messages.at(0).content;
  const auto notes = text.substr(text.find("## nl element-wise math"));
  const auto elementwise = notes.substr(0, notes.find("\n## "));
  EXPECT_NE(elementwise.find("max(64, 2N) with two full tensor inputs"), std::string::npos)
      << elementwise;
  EXPECT_NE(text.find("about max(64, 2N) with two full tensor\n  inputs"), std::string::npos)
      << "rules of thumb";
  EXPECT_EQ(text.find("1.3-2 us"), std::string::npos);
  EXPECT_EQ(text.find("~100 cycles"), std::string::npos) << "the simulator charges 60";
  EXPECT_NE(text.find("~60 cycles"), std::string::npos);
}

TEST(PromptPlanMenu, ProfileShowsEveryMetricOrNamesTheOnesLeftOut) {
  auto input = naive_layernorm_input();
  input.plan_index = 0;
  for (int i = 0; i < 45; ++i) {
    input.kernel.metrics["zz_metric_" + std::to_string(100 + i)] = i;
  }
  auto all = shipped_builder().plan(input);
  ASSERT_TRUE(all.ok());
  const auto& text = all->request.messages.at(0).content;
  EXPECT_NE(text.find("- zz_metric_144: 44"), std::string::npos);
  EXPECT_NE(text.find("- vector_engine_active_time_percent: 99.05"), std::string::npos);
  EXPECT_EQ(text.find("omitted"), std::string::npos);

  PromptBuilderOptions narrow;
  narrow.max_metrics = 51;
  auto cut = shipped_builder(narrow).plan(input);
  ASSERT_TRUE(cut.ok());
  EXPECT_NE(cut->request.messages.at(0).content.find("(not shown: zz_metric_143, zz_metric_144)"),
            std::string::npos);
}

TEST(PromptPlanMenu, ShownItemsBringTheSignaturesOfTheCallsTheyNeed) {
  auto input = naive_layernorm_input();
  input.dropout = 1.0;
  input.plan_index = 0;  // balance_engines alone
  auto balance = shipped_builder().plan(input);
  ASSERT_TRUE(balance.ok()) << balance.failure().describe();
  ASSERT_EQ(balance->menu_ids, std::vector<std::string>{"balance_engines"});
  const auto& text = balance->request.messages.at(0).content;
  const auto section = text.find("## Calls the strategies below need (signatures)");
  ASSERT_NE(section, std::string::npos) << text;
  EXPECT_NE(text.find("`y = nisa.activation(op, data, bias=None, scale=1.0,", section),
            std::string::npos)
      << "the naive kernel imports neuronxcc.nki: the return-value form, optional marked";
  EXPECT_NE(text.find("`y = nisa.tensor_scalar(data, op0, ", section), std::string::npos);

  std::set<std::string> seen;
  for (int plan = 0; plan < 6; ++plan) {
    input.plan_index = plan;
    auto prompt = shipped_builder().plan(input);
    ASSERT_TRUE(prompt.ok());
    if (prompt->menu_ids == std::vector<std::string>{"bn_stats"}) {
      const auto& bn = prompt->request.messages.at(0).content;
      EXPECT_NE(bn.find("`y = nisa.bn_stats(data, mask=None, dtype=None)`"), std::string::npos);
      EXPECT_NE(bn.find("`y = nisa.bn_aggr(data, "), std::string::npos);
      seen.insert("bn_stats");
    }
  }
  EXPECT_EQ(seen.count("bn_stats"), 1U) << "one of the six plans leads with bn_stats";
}

TEST(PromptPlanMenu, NotesSayHowToImportTheIsaAndThatReduceResIsOverwritten) {
  auto input = naive_layernorm_input();
  input.plan_index = 0;
  input.kernel.source = k_balanced_layernorm;  // uses nisa.activation with reduce_res
  auto legacy = shipped_builder().plan(input);
  ASSERT_TRUE(legacy.ok());
  const auto& text = legacy->request.messages.at(0).content;
  EXPECT_NE(text.find("`import neuronxcc.nki.isa as nisa`"), std::string::npos);
  EXPECT_NE(text.find("each call overwrites (it does not\n  accumulate"), std::string::npos);

  std::string modern = input.kernel.source;
  for (auto pos = modern.find("neuronxcc.nki"); pos != std::string::npos;
       pos = modern.find("neuronxcc.nki")) {
    modern.replace(pos, std::string("neuronxcc.nki").size(), "nki");
  }
  input.kernel.source = modern;
  auto current = shipped_builder().plan(input);
  ASSERT_TRUE(current.ok());
  EXPECT_NE(current->request.messages.at(0).content.find("`import nki.isa as nisa`"),
            std::string::npos);
}

TEST(PromptProblemNotes, StateTheModuleConstantsTheReferenceUses) {
  const auto text = describe_problem(read_file("seeds/layernorm/problem.py"),
                                     "beta:float32[8192];gamma:float32[8192];"
                                     "input_tensor:float32[4096,8192]");
  EXPECT_NE(text.find("```python\nEPS = 1e-5\n```"), std::string::npos) << text;
  EXPECT_EQ(text.find("RTOL = "), std::string::npos) << "stated as the tolerance already";
  EXPECT_EQ(text.find("SMALL = "), std::string::npos) << "not a plain literal";

  const std::string problem = R"(import numpy as np
SCALE = 0.5
UNUSED = 3
SHAPE = (128, 64)
KERNEL = "k"

def inputs(seed):
    return {"x": np.ones(SHAPE, dtype=np.float32)}

def reference(x):
    return x * SCALE
)";
  const auto notes = describe_problem(problem, "");
  EXPECT_NE(notes.find("SCALE = 0.5\nSHAPE = (128, 64)\n"), std::string::npos) << notes;
  EXPECT_EQ(notes.find("UNUSED"), std::string::npos);
  EXPECT_EQ(describe_problem(problem, "x:float32[128,64]").find("SHAPE = "), std::string::npos)
      << "inputs() is not shown when the measured inputs are";
}

TEST(PromptProblemNotes, AReferenceModuleIsDescribedByItsComputationToleranceAndBindingOrder) {
  const std::string module = R"(import numpy as np
ROWS = 256
COLS = 64

def get_inputs():
    return [np.random.rand(ROWS, COLS).astype(np.float32) for _ in range(11)]

def forward(zeta, alpha, b2, b3, b4, b5, b6, b7, b8, b9, b10):
    return zeta * alpha + b10

def transform_to_nki_inputs(inputs):
    return [np.reshape(x, (2, 128, COLS)) for x in inputs]
)";
  std::string signature;
  for (const char* name :
       {"alpha", "b10", "b2", "b3", "b4", "b5", "b6", "b7", "b8", "b9", "zeta"}) {
    signature += std::string(signature.empty() ? "" : ";") + name + ":float32[2,128,64]";
  }
  const auto notes = describe_problem(module, signature);
  // forward's source is the computation; the transform says what the kernel is handed.
  EXPECT_NE(notes.find("return zeta * alpha + b10"), std::string::npos) << notes;
  EXPECT_NE(notes.find("np.reshape(x, (2, 128, COLS))"), std::string::npos) << notes;
  EXPECT_NE(notes.find("```python\nCOLS = 64\n```"), std::string::npos) << notes;
  EXPECT_EQ(notes.find("ROWS = "), std::string::npos) << "get_inputs() only; inputs are measured";
  // The rule the harness applies to reference modules, with its default bound.
  EXPECT_NE(notes.find("||out - ref||_2 < rel_l2 * ||ref||_2"), std::string::npos) << notes;
  EXPECT_NE(notes.find("rel_l2 = 2e-5"), std::string::npos) << notes;
  EXPECT_EQ(notes.find("rtol ="), std::string::npos) << notes;
  // Positional binding: forward's order, not the signature's name order.
  const auto zeta = notes.find("- zeta:");
  const auto alpha = notes.find("- alpha:");
  const auto b2 = notes.find("- b2:");
  const auto b10 = notes.find("- b10:");
  ASSERT_NE(zeta, std::string::npos) << notes;
  EXPECT_LT(zeta, alpha);
  EXPECT_LT(alpha, b2);
  EXPECT_LT(b2, b10);

  // Unnamed positional inputs go by number: input2 before input10.
  std::string numbered;
  for (int i : {0, 1, 10, 2, 3, 4, 5, 6, 7, 8, 9}) {
    numbered +=
        std::string(numbered.empty() ? "" : ";") + "input" + std::to_string(i) + ":float32[4]";
  }
  const std::string packed = R"(import numpy as np
def get_inputs():
    return [np.ones(4, dtype=np.float32)] * 11

def forward(*xs):
    return sum(xs)
)";
  const auto by_number = describe_problem(packed, numbered);
  EXPECT_LT(by_number.find("- input2:"), by_number.find("- input10:")) << by_number;
}

}  // namespace
}  // namespace autocomp::search::prompts
