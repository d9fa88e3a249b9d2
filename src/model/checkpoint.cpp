#include "model/checkpoint.h"

#include <cerrno>
#include <cstring>
#include <exception>
#include <fstream>
#include <iostream>
#include <set>
#include <stdexcept>

#include <caffe2/serialize/inline_container.h>
#include <torch/csrc/jit/serialization/export.h>
#include <torch/csrc/jit/serialization/import_read.h>
#include <torch/csrc/jit/serialization/pickler.h>
#include <torch/serialize.h>
#include <torch/torch.h>

#include "core/file_io.h"
#include "core/hash.h"

namespace normlab::model {

torch::Tensor bytes_tensor(const std::string& s) {
  auto t = torch::empty({static_cast<int64_t>(s.size())}, torch::kUInt8);
  std::memcpy(t.data_ptr(), s.data(), s.size());
  return t;
}

std::string tensor_bytes(const torch::Tensor& t) {
  auto c = t.contiguous().to(torch::kUInt8);
  return std::string(static_cast<const char*>(c.data_ptr()), static_cast<size_t>(c.numel()));
}

namespace {

constexpr const char* kMetaKey = "__normlab_meta__";
constexpr const char* kExtraPrefix = "extra/";
constexpr const char* kFormat = "normlab-checkpoint";
// 2: the checksum covers the metadata too (issue 34); 1: the tensors only.
constexpr int kVersion = 2;

// torch::pickle_save, but without TorchScript's type tags on dicts (Python's torch.load with its
// default weights_only=True refuses those: torch.jit._pickle.restore_type_tag), and streamed into
// the file: only the pickle itself (names, shapes) is held in memory, the tensors' bytes go from
// their own memory to the file. A Lanczos state holds gigabytes of Krylov basis, which
// torch::pickle_save would copy into one growing buffer (up to twice its size at once).
void write_untagged(const std::string& path, const c10::IValue& value) {
  std::vector<char> pickled;
  torch::jit::Pickler pickler(
      [&](const char* bytes, size_t n) { pickled.insert(pickled.end(), bytes, bytes + n); },
      /*tensor_table=*/nullptr, /*type_renamer=*/nullptr, /*memoized_class_types=*/nullptr,
      /*get_tensor_id=*/nullptr, /*tag_aggregates=*/false);
  pickler.protocol();
  pickler.pushIValue(value);
  pickler.stop();
  core::write_file_atomic(path, [&](const core::ByteSink& sink) {
    // After the sink's first error (e.g. a full disk) the rest is discarded as if written and the
    // error given back at the end: a short write would make the writer CAFFE_ENFORCE, which in
    // this LibTorch aborts the program (c10::ThrowEnforceNotMet logs FATAL), and exceptions are
    // not to cross the zip library's C callbacks.
    std::exception_ptr failure;
    caffe2::serialize::PyTorchStreamWriter writer([&](const void* bytes, size_t n) -> size_t {
      if (!failure) {
        try {
          sink(static_cast<const char*>(bytes), n);
        } catch (...) {
          failure = std::current_exception();
        }
      }
      return n;
    });
    torch::jit::writeArchiveAndTensors("data", pickled.data(), pickled.size(),
                                       pickler.tensorData(), writer);
    writer.writeEndOfFile();
    if (failure) std::rethrow_exception(failure);
  });
}

// A tensor whose storage holds only its own elements: the archive stores whole storages, so a view
// (e.g. the rows of the Lanczos basis used so far, out of its preallocated capacity) would write
// every byte of its base. The alias shares the memory (no copy); `t` must outlive it.
torch::Tensor exact_storage(const torch::Tensor& t) {
  if (t.storage_offset() == 0 && t.storage().nbytes() == t.nbytes()) return t;
  return torch::from_blob(t.data_ptr(), t.sizes(), t.options());
}

// Over names and contents in name order (std::map), so it does not depend on the writer, then
// (version 2) over the metadata without its checksum, as nlohmann::json writes it: keys sorted,
// numbers in their shortest round-trip form, so parsing and writing again gives the same text.
std::string checksum(const TensorMap& tensors, const nlohmann::json& meta, int version) {
  uint64_t h = core::kHashSeed;
  for (const auto& [name, t] : tensors) {
    auto c = t.detach().cpu().contiguous();
    h = core::hash_bytes(name.data(), name.size(), h);
    h = core::hash_bytes(c.data_ptr(), c.nbytes(), h);
  }
  if (version >= 2) {
    nlohmann::json covered = meta;
    covered.erase("checksum");
    const std::string text = covered.dump();
    h = core::hash_bytes(text.data(), text.size(), h);
  }
  return core::hash_hex(h);
}

// Version-1 files load as before, their metadata unchecked, which is said once per file.
void note_version_one(const std::string& path) {
  static std::set<std::string> told;
  if (told.insert(path).second)
    std::cerr << "normlab: note: " << path << " is a version-1 checkpoint: its checksum covers the tensors but "
              << "not the metadata (update, epoch, configuration), which are taken as they are\n";
}

}  // namespace

void save_tensors(const std::string& path, const TensorMap& tensors) {
  std::vector<torch::Tensor> owners;  // keep the memory exact_storage's aliases point into
  c10::Dict<std::string, torch::Tensor> dict;
  for (const auto& [name, t] : tensors) {
    owners.push_back(t.detach().cpu().contiguous());
    dict.insert(name, exact_storage(owners.back()));
  }
  write_untagged(path, c10::IValue(dict));
}

TensorMap load_tensors(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::runtime_error("cannot read " + path + ": " + std::strerror(errno));
  c10::IValue value;
  try {  // record by record from the file, never the whole file in memory
    caffe2::serialize::PyTorchStreamReader reader(&in);
    value = torch::jit::readArchiveAndTensors("data", /*pickle_prefix=*/"", /*tensor_prefix=*/"",
                                              std::nullopt, std::nullopt, std::nullopt, reader);
  } catch (const std::exception&) {
    throw std::runtime_error(path + ": not a readable PyTorch archive (truncated or foreign file)");
  }
  if (!value.isGenericDict())
    throw std::runtime_error(path + ": expected a dict of tensors, found " + value.tagKind());
  TensorMap out;
  for (const auto& entry : value.toGenericDict()) {
    if (!entry.key().isString() || !entry.value().isTensor())
      throw std::runtime_error(path + ": expected a dict of name -> tensor");
    out[entry.key().toStringRef()] = entry.value().toTensor();
  }
  return out;
}

TensorMap named_parameters(const Model& model) {
  TensorMap out;
  for (const auto& p : model->named_parameters()) out[p.key()] = p.value();
  return out;
}

void save_model(const std::string& path, const Model& model, const nlohmann::json& extra,
                const TensorMap& extra_tensors) {
  auto tensors = named_parameters(model);
  for (const auto& [name, t] : extra_tensors) tensors[kExtraPrefix + name] = t.detach().cpu();
  nlohmann::json meta = extra;
  meta["format"] = kFormat;
  meta["version"] = kVersion;
  meta["model"] = model->config();
  meta["checksum"] = checksum(tensors, meta, kVersion);
  tensors[kMetaKey] = bytes_tensor(meta.dump());
  save_tensors(path, tensors);
}

LoadedModel load_model(const std::string& path) {
  auto tensors = load_tensors(path);
  auto meta_it = tensors.find(kMetaKey);
  if (meta_it == tensors.end())
    throw std::runtime_error(path + ": not a normlab checkpoint (no " + kMetaKey + " entry)");
  LoadedModel loaded;
  int version = 0;
  try {
    loaded.meta = nlohmann::json::parse(tensor_bytes(meta_it->second));
    if (loaded.meta.at("format") != kFormat)
      throw std::runtime_error("format is " + loaded.meta.at("format").dump());
    version = loaded.meta.at("version").get<int>();
    if (version > kVersion)
      throw std::runtime_error("version " + loaded.meta.at("version").dump() + " is newer than this normlab reads");
  } catch (const std::exception& e) {
    throw std::runtime_error(path + ": bad checkpoint metadata: " + e.what());
  }
  tensors.erase(meta_it);
  // Before the model is built from the metadata: a changed size is a mismatch, not an allocation.
  if (version >= 2 && !loaded.meta.contains("checksum"))
    throw std::runtime_error(path + ": checksum missing from the metadata, the file is corrupted");
  if (loaded.meta.contains("checksum") && loaded.meta["checksum"] != checksum(tensors, loaded.meta, version))
    throw std::runtime_error(path + ": checksum mismatch, the file is corrupted" +
                             (version >= 2 ? " (its tensors or its metadata)" : ""));
  if (version < 2) note_version_one(path);
  try {
    loaded.model = create_model(loaded.meta.at("model").get<ModelConfig>());
  } catch (const std::exception& e) {
    throw std::runtime_error(path + ": bad checkpoint metadata: " + e.what());
  }
  for (auto it = tensors.begin(); it != tensors.end();) {
    if (it->first.rfind(kExtraPrefix, 0) == 0) {
      loaded.extra_tensors[it->first.substr(std::strlen(kExtraPrefix))] = it->second;
      it = tensors.erase(it);
    } else {
      ++it;
    }
  }

  torch::NoGradGuard no_grad;
  std::set<std::string> expected;
  for (auto& p : loaded.model->named_parameters()) {
    expected.insert(p.key());
    auto it = tensors.find(p.key());
    if (it == tensors.end()) throw std::runtime_error(path + ": missing parameter " + p.key());
    if (it->second.sizes() != p.value().sizes())
      throw std::runtime_error(path + ": parameter " + p.key() + " has shape " +
                               c10::str(it->second.sizes()) + ", the configuration implies " +
                               c10::str(p.value().sizes()));
    p.value().set_data(it->second.clone());
  }
  for (const auto& [name, t] : tensors)
    if (!expected.count(name)) throw std::runtime_error(path + ": unexpected entry " + name);
  return loaded;
}

}  // namespace normlab::model
