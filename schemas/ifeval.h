// torchrl's IFEvalScoreData (torchrl.envs.llm.reward.ifeval): the four accuracy scores of the
// IFEval instruction-following benchmark, each absent until computed. The C++ twin of
// ifeval.yaml; the generated class goes to torchrl::llm, named explicitly.
#pragma once

#include <tensordict/schema.h>

namespace ifeval_schema {

/// Scores of the IFEval benchmark for a batch of responses.
struct TD_TENSORCLASS TD_NAMESPACE("torchrl::llm") IFEvalScoreData {
  TD_OPTIONAL td::schema::Tensor<float, td::schema::any_shape> prompt_level_strict_acc;
  TD_OPTIONAL td::schema::Tensor<float, td::schema::any_shape> inst_level_strict_acc;
  TD_OPTIONAL td::schema::Tensor<float, td::schema::any_shape> prompt_level_loose_acc;
  TD_OPTIONAL td::schema::Tensor<float, td::schema::any_shape> inst_level_loose_acc;
};

}  // namespace ifeval_schema
