#include "data/batch.h"

#include <algorithm>

#include <torch/torch.h>

#include "core/tokens.h"

namespace normlab::data {
namespace {

// Rows of `rows` right-padded into a (B, longest) int64 tensor.
torch::Tensor pad_rows(const std::vector<Sentence>& rows) {
  size_t longest = 0;
  for (const auto& r : rows) longest = std::max(longest, r.size());
  auto out = torch::full({static_cast<int64_t>(rows.size()), static_cast<int64_t>(longest)}, kPad,
                         torch::kInt64);
  auto acc = out.accessor<int64_t, 2>();
  for (size_t i = 0; i < rows.size(); ++i)
    for (size_t j = 0; j < rows[i].size(); ++j) acc[i][j] = rows[i][j];
  return out;
}

}  // namespace

Batch make_batch(const std::vector<Sentence>& src, const std::vector<Sentence>& tgt, size_t begin,
                 size_t end) {
  std::vector<Sentence> s, p, t;
  Batch batch;
  for (size_t i = begin; i < end; ++i) {
    s.push_back(src[i]);
    s.back().push_back(kEos);
    p.push_back({kEos});
    p.back().insert(p.back().end(), tgt[i].begin(), tgt[i].end());
    t.push_back(tgt[i]);
    t.back().push_back(kEos);
    batch.target_tokens += static_cast<int64_t>(t.back().size());
  }
  batch.src = pad_rows(s);
  batch.prev_output_tokens = pad_rows(p);
  batch.target = pad_rows(t);
  return batch;
}

namespace {

Batch block_batch(const std::vector<Sentence>& blocks, const std::vector<int64_t>& indices) {
  std::vector<Sentence> inputs, targets;
  Batch batch;
  for (auto i : indices) {
    const auto& block = blocks.at(static_cast<size_t>(i));
    TORCH_CHECK(block.size() >= 2, "a block of running text needs at least 2 tokens, got ", block.size());
    inputs.emplace_back(block.begin(), block.end() - 1);
    targets.emplace_back(block.begin() + 1, block.end());
    batch.target_tokens += static_cast<int64_t>(targets.back().size());
  }
  batch.src = torch::empty({static_cast<int64_t>(indices.size()), 0}, torch::kInt64);
  batch.prev_output_tokens = pad_rows(inputs);
  batch.target = pad_rows(targets);
  return batch;
}

// An encoder's blocks, src and target alike (data/masking.h then masks them).
Batch masked_block_batch(const std::vector<Sentence>& blocks, const std::vector<int64_t>& indices) {
  std::vector<Sentence> rows;
  for (auto i : indices) rows.push_back(blocks.at(static_cast<size_t>(i)));
  Batch batch;
  batch.src = pad_rows(rows);
  batch.prev_output_tokens = torch::empty({static_cast<int64_t>(rows.size()), 0}, torch::kInt64);
  batch.target = batch.src.clone();
  batch.target_tokens = batch.target.ne(kPad).sum().item<int64_t>();
  return batch;
}

// A classifier's examples: src the token rows, target their class ids (B,1), segments 1 after
// each row's first </s> (sentence B of a pair; a single sentence is all 0), padding 0.
Batch classify_batch(const std::vector<Sentence>& inputs, const std::vector<Sentence>& labels,
                     const std::vector<int64_t>& indices) {
  std::vector<Sentence> rows, targets;
  for (auto i : indices) {
    rows.push_back(inputs.at(static_cast<size_t>(i)));
    targets.push_back(labels.at(static_cast<size_t>(i)));
    TORCH_CHECK(targets.back().size() == 1, "a classifier's example has one label, example ", i, " has ",
                targets.back().size());
  }
  Batch batch;
  batch.src = pad_rows(rows);
  batch.prev_output_tokens = torch::empty({static_cast<int64_t>(rows.size()), 0}, torch::kInt64);
  batch.target = pad_rows(targets);
  batch.target_tokens = static_cast<int64_t>(rows.size());
  const auto after_eos = batch.src.eq(kEos).to(torch::kInt64).cumsum(1) - batch.src.eq(kEos).to(torch::kInt64);
  batch.segments = after_eos.gt(0).logical_and(batch.src.ne(kPad)).to(torch::kInt64);
  return batch;
}

}  // namespace

Batch masked_batch(const std::vector<Sentence>& inputs, const std::vector<Sentence>& targets, size_t begin,
                   size_t end) {
  std::vector<Sentence> in(inputs.begin() + static_cast<std::ptrdiff_t>(begin),
                           inputs.begin() + static_cast<std::ptrdiff_t>(end));
  std::vector<Sentence> out(targets.begin() + static_cast<std::ptrdiff_t>(begin),
                            targets.begin() + static_cast<std::ptrdiff_t>(end));
  for (size_t i = 0; i < in.size(); ++i)
    TORCH_CHECK(in[i].size() == out[i].size(), "masked_batch: input ", begin + i, " has ", in[i].size(),
                " tokens but its target ", out[i].size());
  Batch batch;
  batch.src = pad_rows(in);
  batch.prev_output_tokens = torch::empty({static_cast<int64_t>(in.size()), 0}, torch::kInt64);
  batch.target = pad_rows(out);
  batch.target_tokens = batch.target.ne(kPad).sum().item<int64_t>();
  return batch;
}

Batch gather_batch(const std::vector<Sentence>& src, const std::vector<Sentence>& tgt,
                   const std::vector<int64_t>& indices, Layout layout) {
  if (layout == Layout::kBlocks) return block_batch(tgt, indices);
  if (layout == Layout::kMaskedBlocks) return masked_block_batch(src, indices);
  if (layout == Layout::kClassify) return classify_batch(src, tgt, indices);
  std::vector<Sentence> s, t;
  for (auto i : indices) {
    s.push_back(src.at(static_cast<size_t>(i)));
    t.push_back(tgt.at(static_cast<size_t>(i)));
  }
  return make_batch(s, t, 0, s.size());
}

}  // namespace normlab::data
