// Layers added on top of a trained model's stacks, and their initialisation: plain Xavier,
// T-Fixup's factors, or DT-Fixup's data-dependent ones (Xu et al. 2021; docs/schemes.md,
// "Layers on a trained model"). `normlab train --init-from` builds on it.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "model/config.h"
#include "data/batch.h"
#include "model/seq2seq.h"

namespace normlab::model {

enum class AddedLayerInit {
  kXavier,   // fairseq's Xavier (init.h), as a fresh layer of the scheme
  kTFixup,   // then T-Fixup's factors for a stack of the added depth (REFERENCE §1)
  // DT-Fixup as the authors build it: layers without norms, x + drop(f(x)) (ModelConfig::
  // norm_free_*), Xavier, then v, out, fc1, fc2 divided by dt_fixup_divisor(mu, layers).
  kDtFixup,
  kDtFixupPostLn,  // the same scaling of layers that keep the checkpoint's Post-LN norms
};
std::string to_string(AddedLayerInit v);
// Throws std::invalid_argument naming `option`, the value and the choices.
AddedLayerInit parse_added_layer_init(const std::string& s, const std::string& option = "--init");
// Whether `--init name` is for layers added to a trained model only (the DT-Fixup forms).
bool added_layers_only_init(const std::string& name);

struct AddedLayers {
  int64_t encoder = 0;  // layers put on top of the encoder stack
  int64_t decoder = 0;  // ... of the decoder stack (before its final norm and projection)
  AddedLayerInit init = AddedLayerInit::kXavier;
};

// Negative layer counts, one message each naming the option (empty when valid).
std::vector<std::string> added_count_problems(const AddedLayers& added);
// Why `trained` cannot take `added` (empty when it can), one message each: negative counts;
// layers for a stack the kind has not (a decoder-only model's encoder); a classifier;
// schemes whose existing layers would change with the depth (mix placement, Admin, ReZero,
// DeepNorm residuals); DT-Fixup on anything but a Post-LN model (the authors stack on RoBERTa's
// Post-LN output); layers with norms on a stack that ends in norm-free ones.
std::vector<std::string> added_layer_problems(const ModelConfig& trained, const AddedLayers& added);

// The configuration of `trained` with the added layers, norm-free with kDtFixup.
ModelConfig grown_config(const ModelConfig& trained, const AddedLayers& added);

// Whether parameter `name` (e.g. "encoder.layers.7.fc1.weight") belongs to a layer added to
// a model trained with `trained` layers.
bool is_added_parameter(const std::string& name, const ModelConfig& trained);

// DT-Fixup's divisor (Xu et al. 2021, Theorem 3.1; the authors' optimizers.py dt_fixup):
// sqrt(layers * (4 mu^2 + 2 mu + 2)), mu the largest norm of the added stack's input.
double dt_fixup_divisor(double mu, double layers);

// What the added layers' initialisation measured and used; 0 where it does not apply.
struct StackingReport {
  double mu_encoder = 0, divisor_encoder = 0;  // DT-Fixup: the encoder's added layers
  double mu_decoder = 0, divisor_decoder = 0;  // ... the decoder's
  double t_fixup_encoder = 0, t_fixup_decoder = 0;  // T-Fixup's factors
};
void to_json(nlohmann::json& j, const StackingReport& r);

// The largest L2 norm of a non-padding token's vector among the inputs of the first added
// encoder layer (the output of the trained layers) over `batches`, in eval mode. 0 without
// added encoder layers.
double max_encoder_input_norm(Seq2Seq& model, int64_t trained_layers, const std::vector<data::Batch>& batches);
// The same for the first added decoder layer: the largest of its input (the output of the
// trained decoder layers) and of the encoder output that its cross-attention reads.
double max_decoder_input_norm(Seq2Seq& model, int64_t trained_layers, const std::vector<data::Batch>& batches);

struct GrownModel {
  Model model{nullptr};
  StackingReport report;
};
// `trained` (any kind: an encoder-decoder, a decoder-only model's decoder, a masked LM's encoder
// as the DT-Fixup authors stack on RoBERTa) with the added layers on top: every trained
// parameter copied; the added layers initialised with torch's generator seeded by `seed`, as
// added.init says (a single stack's T-Fixup factor is its own, (6N)^(-1/4)). DT-Fixup measures
// mu on `batches` (the training data): the encoder's first, then, with the encoder's added
// layers already scaled, the decoder's. Throws std::invalid_argument for added_layer_problems().
GrownModel add_layers(const Model& trained, const AddedLayers& added, uint64_t seed,
                      const std::vector<data::Batch>& batches);

}  // namespace normlab::model
