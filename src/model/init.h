// Parameter initialisation for every scheme (REFERENCE §1), applied after construction.
#pragma once

#include <cstdint>

#include <torch/types.h>

#include "data/batch.h"
#include "model/decoder_only.h"
#include "model/encoder_only.h"
#include "model/seq2seq.h"

namespace normlab::model {

// The encoder-decoder's init_parameters() (model.h's initialize() seeds first): every parameter
// as model.config().scheme.init says. admin-profile needs `profile` (throws otherwise).
void init_encoder_decoder(Seq2SeqImpl& model, const data::Batch* profile);

// The decoder-only model's init_parameters(): its one stack as the encoder-decoder's decoder is
// initialised, with the single-stack constants of scheme_constants.h (stack_constants).
void init_decoder_only(DecoderOnlyImpl& model, const data::Batch* profile);

// The encoder-only model's init_parameters(): its encoder as the encoder-decoder's with the
// single-stack constants (or BERT's init), segment vectors as learned positions, the LM head's
// dense layer Xavier (N(0, 0.02) under BERT's and GPT-2's inits), its bias 0.
void init_encoder_only(EncoderOnlyImpl& model, const data::Batch* profile);
// A classification head (encoder_only.h): dense and out_proj N(0, 0.02) under BERT's and GPT-2's
// inits (fairseq's init_bert_params, Hugging Face's _init_weights), else Xavier-uniform; biases
// 0. Call under torch::NoGradGuard.
void init_classification_head(ClassificationHeadImpl& head, const ModelConfig& c);

// Admin profiling alone (REFERENCE §1): one training-mode forward on `batch` (its src and
// prev_output_tokens) that sets every omega.
void profile_admin(Seq2SeqImpl& model, const data::Batch& batch);

// The pieces initialize() is made of, for layers added to a trained model (model/stacking.h).
// fairseq's Xavier-uniform (q, k, v gain 1/sqrt(2): they were one fused matrix; out_proj,
// fc1, fc2 gain 1; biases 0). Call under torch::NoGradGuard.
void init_layer_xavier(EncoderLayerImpl& layer);
void init_layer_xavier(DecoderLayerImpl& layer);
// T-Fixup's scaling of a layer (REFERENCE §1), DT-Fixup's with factor < 1: every attention's
// v_proj by factor * sqrt(2) (undoing the fused gain, so v starts as Xavier with gain factor),
// out_proj, fc1 and fc2 weights by factor; biases untouched.
void scale_value_and_ffn(EncoderLayerImpl& layer, double factor);
void scale_value_and_ffn(DecoderLayerImpl& layer, double factor);

}  // namespace normlab::model
