// `normlab export --format hf`: a decoder-only model as a Hugging Face transformers GPT-2, an
// encoder-only model as a BERT (docs/conventions.md, "Hugging Face"): DIR/config.json and
// DIR/model.safetensors, which GPT2LMHeadModel / BertForMaskedLM.from_pretrained(DIR) load as
// they are and which give normlab's logits.
#pragma once

#include <string>
#include <vector>

#include "model/model.h"

namespace normlab::model {

// Every way `config` is not a model GPT2LMHeadModel computes, one message each (empty when it
// is one): a decoder-only Pre-LN model with LayerNorm, a plain residual, no QK-norm or
// LayerNorm scaling, tokens not scaled by sqrt(C). Sinusoidal positions are written as the
// (then learnable) wpe table; the activation as GPT2Config's activation_function.
std::vector<std::string> hf_gpt2_problems(const ModelConfig& config);

// The same for BertForMaskedLM: an encoder-only Post-LN model in BERT's form (learned positions,
// a segment table, a norm on the embedding) with LayerNorm, a plain residual, no QK-norm or
// LayerNorm scaling, tokens unscaled.
std::vector<std::string> hf_bert_problems(const ModelConfig& config);

// Writes DIR/config.json and DIR/model.safetensors (float32), each atomically; DIR is created:
// BERT for an encoder-only model, else GPT-2. Throws std::invalid_argument joining that
// architecture's problems when there are any.
void export_hf(const Model& model, const std::string& dir);

}  // namespace normlab::model
