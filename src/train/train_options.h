// `normlab train`'s options, each declared once (core/option_table.h): the tables of TrainConfig
// and of its parts, and the names of their enums. A new train option is one line in
// train_options.cpp; its flag, config.json key, help and range check all come from there.
#pragma once

#include "core/option_table.h"

namespace normlab::model {
struct AddedLayers;
}
namespace normlab::data {
struct BatchingConfig;
struct VocabTrainOptions;
}  // namespace normlab::data

namespace normlab::train {

struct TrainConfig;
struct InitFromConfig;
struct OptimizerConfig;
struct ScheduleConfig;
struct AutoWarmupSettings;
struct LossOptions;
struct LossScalerConfig;
struct TraceConfig;
struct CurvatureConfig;
enum class ScheduleKind;
enum class WsdDecay;
enum class WarmupMode;
enum class RAdamFallback;
enum class AdamInitV;
enum class WeightDecayMode;
enum class MuonAdjustLr;
enum class LabelSmoothingFormula;
enum class Preconditioner;
enum class BestMetric;

// The whole run's options: its parts' tables with their keys under config.json's sections.
const core::OptionTable<TrainConfig>& train_options();
// The parts' own, each checked by the part's problems().
const core::OptionTable<ScheduleConfig>& schedule_options();
const core::OptionTable<AutoWarmupSettings>& auto_warmup_options();
const core::OptionTable<OptimizerConfig>& optimizer_options();
const core::OptionTable<LossOptions>& loss_options();
const core::OptionTable<LossScalerConfig>& loss_scaler_options();
const core::OptionTable<TraceConfig>& trace_options();
const core::OptionTable<CurvatureConfig>& curvature_options();
const core::OptionTable<InitFromConfig>& init_from_options();

// Each enum's (value, name) table: its parse_*, to_string and the choices in the help.
const core::EnumNames<ScheduleKind>& schedule_kinds();
const core::EnumNames<WsdDecay>& wsd_decays();
const core::EnumNames<WarmupMode>& warmup_modes();
const core::EnumNames<RAdamFallback>& radam_fallbacks();
const core::EnumNames<AdamInitV>& adam_init_vs();
const core::EnumNames<WeightDecayMode>& weight_decay_modes();
const core::EnumNames<MuonAdjustLr>& muon_adjust_lrs();
const core::EnumNames<LabelSmoothingFormula>& label_smoothing_formulas();
const core::EnumNames<Preconditioner>& preconditioners();
const core::EnumNames<BestMetric>& best_metrics();

}  // namespace normlab::train
