//! Saved models (room: `model`): a model's parameters as a safetensors file, and back.
//!
//! The file holds one F32 tensor per parameter tensor of the model, named as
//! [`Model::groups`] names them (`"{layer index}.weight"`, `"{layer index}.bias"`: the names of a
//! PyTorch `nn.Sequential` with the same layers, flatten and activations included), in PyTorch's
//! layouts: dense weight `[out, in]`, convolution weight `[C_out, C_in, kh, kw]` (each layer's
//! file converts from its storage layout), group-norm weight and bias `[C]`. Images enter the
//! model channel-major `[C, H, W]`, as PyTorch's. The safetensors metadata has one key, `"dpx"`,
//! whose value is a JSON object (keys sorted, so the same model gives the same bytes):
//! `format` ([`FORMAT`]), `model_spec` (the [`ModelSpec`] the file was saved from, as JSON) and
//! what the caller adds (version, seed, ε, ...).
//!
//! Loading checks every tensor against the model: a missing tensor, an extra one, a wrong dtype or
//! shape is an error naming the tensor. A file larger than the model could need is refused before
//! it is read.

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};

use ndarray::{Array1, ArrayView1, s};
use safetensors::tensor::{Dtype, SafeTensors, TensorView};

use super::network::Model;
use super::spec::ModelSpec;

/// The value of the metadata's `format` field.
pub const FORMAT: &str = "dpx-model/1";

/// Room for the safetensors header beyond the tensors' bytes (names, shapes, metadata).
const HEADER_ALLOWANCE: u64 = 16 << 20;

/// What can go wrong saving or loading a model file. Messages name the file and the tensor.
#[derive(Debug, thiserror::Error)]
pub enum ArtifactError {
    #[error("{}: cannot read the model file: {reason}", path.display())]
    Io { path: PathBuf, reason: String },
    #[error("{}: not a safetensors model file: {reason}", path.display())]
    Format { path: PathBuf, reason: String },
    #[error(
        "{}: {size} bytes, more than a model of {params} parameters needs; is it the right file?",
        path.display()
    )]
    TooLarge {
        path: PathBuf,
        size: u64,
        params: usize,
    },
    #[error("{}: tensor {name} is missing (the model has it, with shape {shape:?})", path.display())]
    Missing {
        path: PathBuf,
        name: String,
        shape: Vec<usize>,
    },
    #[error(
        "{}: tensor {name} is {dtype} {found:?}, but the model needs F32 {expected:?}",
        path.display()
    )]
    Shape {
        path: PathBuf,
        name: String,
        dtype: String,
        found: Vec<usize>,
        expected: Vec<usize>,
    },
    #[error("{}: tensor {name} is not part of the model (its tensors are {known})", path.display())]
    Extra {
        path: PathBuf,
        name: String,
        known: String,
    },
    #[error("cannot serialise the model: {0}")]
    Serialise(String),
}

impl Model {
    /// The model with parameters `params` as safetensors bytes; `metadata` is added to the
    /// `"dpx"` metadata object beside `format` and `model_spec`.
    pub fn to_safetensors(
        &self,
        params: ArrayView1<'_, f32>,
        metadata: &BTreeMap<String, serde_json::Value>,
    ) -> Result<Vec<u8>, ArtifactError> {
        let params = params.as_standard_layout();
        let mut tensors: Vec<(String, Vec<usize>, Vec<u8>)> = Vec::new();
        for layer in self.layers() {
            for (t, tensor) in layer.params().iter().enumerate() {
                let stored = params.slice(s![tensor.range.clone()]);
                let stored = stored.as_slice().unwrap_or(&[]);
                let saved = layer.saved_layout(t, stored);
                let bytes: Vec<u8> = saved.iter().flat_map(|v| v.to_le_bytes()).collect();
                tensors.push((tensor.name.clone(), layer.saved_shape(t), bytes));
            }
        }
        let views = tensors
            .iter()
            .map(|(name, shape, bytes)| {
                TensorView::new(Dtype::F32, shape.clone(), bytes)
                    .map(|v| (name.clone(), v))
                    .map_err(|e| ArtifactError::Serialise(e.to_string()))
            })
            .collect::<Result<Vec<_>, _>>()?;
        let mut meta: BTreeMap<String, serde_json::Value> = metadata.clone();
        meta.insert("format".into(), FORMAT.into());
        let spec = serde_json::to_value(self.spec())
            .map_err(|e| ArtifactError::Serialise(e.to_string()))?;
        meta.insert("model_spec".into(), spec);
        let json =
            serde_json::to_string(&meta).map_err(|e| ArtifactError::Serialise(e.to_string()))?;
        let info = HashMap::from([("dpx".to_string(), json)]);
        safetensors::serialize(views, Some(info))
            .map_err(|e| ArtifactError::Serialise(e.to_string()))
    }

    /// The largest file [`Model::load_safetensors`] reads for this model.
    pub fn saved_size_limit(&self) -> u64 {
        self.num_params() as u64 * 4 + HEADER_ALLOWANCE
    }

    /// Read a model file saved for this model's architecture: every tensor present, F32, of the
    /// model's shape, and no other. Returns the flat parameter vector.
    pub fn load_safetensors(&self, path: &Path) -> Result<Array1<f32>, ArtifactError> {
        let bytes = self.read_model_file(path)?;
        self.params_from_safetensors(&bytes, path)
    }

    /// The bytes of a model file, refused unread when larger than this model could need.
    pub fn read_model_file(&self, path: &Path) -> Result<Vec<u8>, ArtifactError> {
        let io = |e: std::io::Error| ArtifactError::Io {
            path: path.to_path_buf(),
            reason: e.to_string(),
        };
        let size = std::fs::metadata(path).map_err(io)?.len();
        if size > self.saved_size_limit() {
            return Err(ArtifactError::TooLarge {
                path: path.to_path_buf(),
                size,
                params: self.num_params(),
            });
        }
        std::fs::read(path).map_err(io)
    }

    /// [`Model::load_safetensors`] on bytes already read (`path` names them in errors).
    pub fn params_from_safetensors(
        &self,
        bytes: &[u8],
        path: &Path,
    ) -> Result<Array1<f32>, ArtifactError> {
        let file = SafeTensors::deserialize(bytes).map_err(|e| ArtifactError::Format {
            path: path.to_path_buf(),
            reason: e.to_string(),
        })?;
        let mut params = Array1::<f32>::zeros(self.num_params());
        let mut known = Vec::new();
        for layer in self.layers() {
            for (t, tensor) in layer.params().iter().enumerate() {
                known.push(tensor.name.clone());
                let expected = layer.saved_shape(t);
                let view = file
                    .tensor(&tensor.name)
                    .map_err(|_| ArtifactError::Missing {
                        path: path.to_path_buf(),
                        name: tensor.name.clone(),
                        shape: expected.clone(),
                    })?;
                if view.dtype() != Dtype::F32 || view.shape() != expected.as_slice() {
                    return Err(ArtifactError::Shape {
                        path: path.to_path_buf(),
                        name: tensor.name.clone(),
                        dtype: format!("{:?}", view.dtype()),
                        found: view.shape().to_vec(),
                        expected,
                    });
                }
                let saved: Vec<f32> = view
                    .data()
                    .chunks_exact(4)
                    .map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]]))
                    .collect();
                let stored = layer.stored_layout(t, &saved);
                params
                    .slice_mut(s![tensor.range.clone()])
                    .iter_mut()
                    .zip(stored)
                    .for_each(|(p, v)| *p = v);
            }
        }
        let mut names: Vec<&str> = file.names();
        names.sort_unstable();
        if let Some(extra) = names.iter().find(|n| !known.iter().any(|k| k == *n)) {
            return Err(ArtifactError::Extra {
                path: path.to_path_buf(),
                name: extra.to_string(),
                known: known.join(", "),
            });
        }
        Ok(params)
    }
}

/// The `"dpx"` metadata object of a model file's bytes (`None` when the file has none).
pub fn read_metadata(
    bytes: &[u8],
    path: &Path,
) -> Result<Option<serde_json::Map<String, serde_json::Value>>, ArtifactError> {
    let format = |reason: String| ArtifactError::Format {
        path: path.to_path_buf(),
        reason,
    };
    let (_, meta) = SafeTensors::read_metadata(bytes).map_err(|e| format(e.to_string()))?;
    let Some(text) = meta.metadata().as_ref().and_then(|m| m.get("dpx")) else {
        return Ok(None);
    };
    match serde_json::from_str::<serde_json::Value>(text) {
        Ok(serde_json::Value::Object(map)) => Ok(Some(map)),
        _ => Err(format("its \"dpx\" metadata is not a JSON object".into())),
    }
}

/// The [`ModelSpec`] a model file was saved from, when its metadata holds one.
pub fn saved_spec(
    meta: &serde_json::Map<String, serde_json::Value>,
    path: &Path,
) -> Result<Option<ModelSpec>, ArtifactError> {
    meta.get("model_spec")
        .map(|v| {
            serde_json::from_value(v.clone()).map_err(|e| ArtifactError::Format {
                path: path.to_path_buf(),
                reason: format!("its model_spec does not parse: {e}"),
            })
        })
        .transpose()
}
