//! Config room: the resolved config, every default made explicit, written beside results.
//!
//! Owns the inverse of `spec::validate`: an [`ExperimentSpec`] back to a [`RawConfig`] with every
//! key that applies set, and that to TOML (`results/<name>/config.toml`). Validating the written
//! TOML gives back an equal spec (a test checks this for every shipped config). Must not decide
//! any value: it only spells out what the spec holds.

use super::kinds::{AcceleratedMethodKind, L1SensitivityKind};
use super::kinds::{Features, LayerKind, Loss};
use super::raw::{
    AutoWord, RawAdaclip, RawAdagradNorm, RawAdam, RawAugmentation, RawAutomatic, RawClip,
    RawConfig, RawData, RawDcsgd, RawDecay, RawExperiment, RawLayer, RawLrSchedule, RawModel,
    RawNoise, RawOutput, RawPerLayer, RawPrivacy, RawQuantile, RawSeeds, RawSynthetic, RawThreads,
    RawTrain,
};
use super::raw::{RawAccelerated, RawNumberOrWord};
use super::spec::{AcceleratedSpec, MomentumSpec, SensitivitySpec, SmoothnessSpec};
use super::spec::{
    Budget, ClipSpec, DEFAULT_SCATTERING_ANGLES, DEFAULT_SCATTERING_J, DataSource, Every,
    ExperimentSpec, FeatureMap, LayerSpec, LrSchedule, ModelArchitecture, NoiseMechanism,
    NoiseSchedule, OptimizerSpec, Sampler, SyntheticSpec, TestSet, Threads, TrainLength,
};

/// An unsigned count as the raw (i64) TOML integer. Every count in a spec was validated from an
/// i64, so this never saturates in practice.
fn int<T: TryInto<i64>>(v: T) -> i64 {
    v.try_into().unwrap_or(i64::MAX)
}

fn path_string(p: &std::path::Path) -> String {
    p.to_string_lossy().into_owned()
}

impl ExperimentSpec {
    /// The spec as a raw config with every applicable key set (defaults explicit).
    pub fn to_raw(&self) -> RawConfig {
        RawConfig {
            experiment: RawExperiment {
                name: Some(self.name.clone()),
                seeds: Some(RawSeeds::List(self.seeds.iter().map(|&s| int(s)).collect())),
                description: Some(self.description.clone()),
            },
            data: self.raw_data(),
            model: self.raw_model(),
            train: self.raw_train(),
            clip: self.raw_clip(),
            noise: match &self.privacy {
                None => RawNoise::default(),
                Some(p) => {
                    let mut raw = RawNoise {
                        // Written only when not the default, so the resolved configs of
                        // DP-SGD runs stay as they were.
                        mechanism: (p.mechanism != NoiseMechanism::Independent)
                            .then(|| p.mechanism.kind()),
                        bands: match p.mechanism {
                            NoiseMechanism::Independent => None,
                            NoiseMechanism::BandMf { bands } => Some(bands as i64),
                        },
                        schedule: Some(p.noise_schedule.kind()),
                        noise_multiplier: match p.budget {
                            Budget::Calibrated { .. } => None,
                            Budget::NoiseMultiplier { noise_multiplier }
                            | Budget::UntilSpent {
                                noise_multiplier, ..
                            } => Some(noise_multiplier),
                        },
                        round_digits: p.round_digits.map(i64::from),
                        ..RawNoise::default()
                    };
                    match &p.noise_schedule {
                        NoiseSchedule::Constant => {}
                        NoiseSchedule::Adp { power } => raw.power = Some(*power),
                        NoiseSchedule::AdpAdagrad { b0_sq, c_alpha } => {
                            raw.b0_sq = Some(*b0_sq);
                            raw.c_alpha = Some(*c_alpha);
                        }
                        NoiseSchedule::Exponential { decay }
                        | NoiseSchedule::TimeDecay { decay } => raw.decay = Some(*decay),
                        NoiseSchedule::Step { factor, every } => {
                            raw.factor = Some(*factor);
                            (raw.every_epochs, raw.every_steps) = split_every(*every);
                        }
                        NoiseSchedule::Polynomial {
                            end_ratio,
                            power,
                            every,
                        } => {
                            raw.end_ratio = Some(*end_ratio);
                            raw.power = Some(*power);
                            (raw.every_epochs, raw.every_steps) = split_every(*every);
                        }
                        NoiseSchedule::InfluenceGd { gamma } => raw.gamma = Some(*gamma),
                        NoiseSchedule::InfluenceMomentum { gamma, beta } => {
                            raw.gamma = Some(*gamma);
                            raw.beta = Some(*beta);
                        }
                        NoiseSchedule::InfluenceQuadratic { .. } => {}
                        NoiseSchedule::InfluenceRetrained { estimate: e, .. } => {
                            raw.retrain_sigma_min = Some(e.sigma_min);
                            raw.retrain_sigma_max = Some(e.sigma_max);
                            raw.retrain_points = Some(e.points as i64);
                            raw.retrain_repeats = Some(e.repeats as i64);
                            raw.retrain_steps =
                                Some(e.steps.map_or(0, |s| i64::try_from(s).unwrap_or(i64::MAX)));
                            raw.retrain_seed = Some(i64::try_from(e.seed).unwrap_or(i64::MAX));
                        }
                        NoiseSchedule::File { path, values } => match path {
                            Some(path) => raw.path = Some(path_string(path)),
                            None => raw.values = Some(values.to_vec()),
                        },
                    }
                    raw
                }
            },
            privacy: match &self.privacy {
                None => RawPrivacy {
                    enabled: Some(false),
                    ..RawPrivacy::default()
                },
                Some(p) => RawPrivacy {
                    enabled: Some(true),
                    epsilon: match p.budget {
                        Budget::NoiseMultiplier { .. } => None,
                        Budget::Calibrated { epsilon } | Budget::UntilSpent { epsilon, .. } => {
                            Some(epsilon)
                        }
                    },
                    delta: Some(p.delta),
                    accountant: Some(p.accountant),
                    neighbouring: Some(p.neighbouring),
                    secure_noise: Some(p.secure_noise),
                    stop_when_spent: Some(matches!(p.budget, Budget::UntilSpent { .. })),
                },
            },
            output: RawOutput {
                dir: Some(path_string(&self.output.dir)),
                save_model_every_evals: self.output.save_model_every_evals.map(int),
            },
            accelerated: self.accelerated.as_ref().map(raw_accelerated),
        }
    }

    /// The spec with its input paths (`data.path`, `data.test_path`, `noise.path`) made absolute
    /// against the working directory, so the resolved config written beside the results names
    /// the same files when it is reloaded from another directory. `output.dir` is kept as given.
    pub fn with_absolute_paths(&self) -> ExperimentSpec {
        let abs = |p: &mut std::path::PathBuf| {
            if let Ok(a) = std::path::absolute(&*p) {
                *p = a;
            }
        };
        let mut spec = self.clone();
        let abs_test = |t: &mut TestSet| {
            if let TestSet::File(p) = t {
                abs(p);
            }
        };
        match &mut spec.data.source {
            DataSource::Standard { dir, .. } => {
                if let Some(d) = dir {
                    abs(d);
                }
            }
            DataSource::Libsvm { path, test } | DataSource::Csv { path, test, .. } => {
                abs(path);
                abs_test(test);
            }
            DataSource::Synthetic(_) => {}
        }
        if let Some(p) = &mut spec.privacy
            && let NoiseSchedule::File {
                path: Some(path), ..
            } = &mut p.noise_schedule
        {
            abs(path);
        }
        spec
    }

    /// The resolved config as TOML, for `results/<name>/config.toml`.
    pub fn to_resolved_toml(&self) -> String {
        let mut out = String::from(
            "# Resolved configuration written by dpx: every default is explicit.\n\
             # `dpx run` on this file repeats the experiment.\n",
        );
        // A RawConfig is tables of strings, numbers, booleans and arrays: serialising it cannot
        // fail; if it ever did, the comment says so rather than losing the run.
        match toml::to_string(&self.to_raw()) {
            Ok(s) => out.push_str(&s),
            Err(e) => out.push_str(&format!("# could not serialise the configuration: {e}\n")),
        }
        out
    }

    fn raw_clip(&self) -> RawClip {
        let base = RawClip {
            policy: Some(self.clip.kind()),
            ..RawClip::default()
        };
        match self.clip {
            ClipSpec::None => base,
            ClipSpec::Flat { clip_norm } => RawClip {
                clip_norm: Some(clip_norm),
                ..base
            },
            ClipSpec::PerLayer { clip_norm, split } => RawClip {
                clip_norm: Some(clip_norm),
                per_layer: Some(RawPerLayer { split: Some(split) }),
                ..base
            },
            ClipSpec::Decay {
                clip_norm,
                final_ratio,
            } => RawClip {
                clip_norm: Some(clip_norm),
                decay: Some(RawDecay {
                    final_ratio: Some(final_ratio),
                }),
                ..base
            },
            ClipSpec::Automatic { gamma } => RawClip {
                automatic: Some(RawAutomatic { gamma: Some(gamma) }),
                ..base
            },
            ClipSpec::Quantile {
                initial_clip_norm,
                target_quantile,
                learning_rate,
                count_noise_std,
            } => RawClip {
                clip_norm: Some(initial_clip_norm),
                quantile: Some(RawQuantile {
                    target_quantile: Some(target_quantile),
                    learning_rate: Some(learning_rate),
                    count_noise_std: Some(count_noise_std),
                }),
                ..base
            },
            ClipSpec::Adaclip {
                gamma,
                beta1,
                beta2,
                h1,
                h2,
                initial_std,
                variance_scale,
            } => RawClip {
                adaclip: Some(RawAdaclip {
                    gamma: Some(gamma),
                    beta1: Some(beta1),
                    beta2: Some(beta2),
                    h1: Some(h1),
                    h2: Some(h2),
                    initial_std: Some(initial_std),
                    variance_scale: Some(variance_scale),
                }),
                ..base
            },
            ClipSpec::Dcsgd {
                initial_clip_norm,
                percentile,
                bins,
                histogram_noise_multiplier,
                initial_range,
            } => {
                let table = RawDcsgd {
                    percentile,
                    bins: Some(int(bins)),
                    histogram_noise_multiplier: Some(histogram_noise_multiplier),
                    initial_range: Some(initial_range),
                };
                let (dcsgd_p, dcsgd_e) = if percentile.is_some() {
                    (Some(table), None)
                } else {
                    (None, Some(table))
                };
                RawClip {
                    clip_norm: Some(initial_clip_norm),
                    dcsgd_p,
                    dcsgd_e,
                    ..base
                }
            }
        }
    }

    fn raw_data(&self) -> RawData {
        let d = &self.data;
        let mut raw = RawData {
            dataset: Some(d.source.dataset()),
            scale: Some(d.scale),
            standardize: Some(d.standardize),
            standardize_mean: d.fixed_standardization.as_ref().map(|(m, _)| m.clone()),
            standardize_std: d.fixed_standardization.as_ref().map(|(_, s)| s.clone()),
            standardize_noise_multiplier: d.private_standardization.map(|p| p.noise_multiplier),
            standardize_mean_clip_norm: d.private_standardization.map(|p| p.mean_clip_norm),
            standardize_second_moment_clip_norm: d
                .private_standardization
                .map(|p| p.second_moment_clip_norm),
            standardize_seed: d.private_standardization.map(|p| p.seed as i64),
            standardize_variance_floor: d.private_standardization.and_then(|p| p.variance_floor),
            allow_nonprivate_statistics: d.allow_nonprivate_statistics.then_some(true),
            max_norm: d.max_norm,
            classes: d
                .classes
                .as_ref()
                .map(|c| c.iter().map(|&x| int(x)).collect()),
            public_fraction: d.public_split.map(|s| s.fraction),
            train_on: d.public_split.map(|s| s.train_on),
            subsample: d.subsample.map(int),
            validation_fraction: Some(d.validation_fraction),
            pca_components: d.pca_components.map(int),
            pca_noise_multiplier: d.private_pca.map(|p| p.noise_multiplier),
            pca_seed: d.private_pca.map(|p| p.seed as i64),
            ..RawData::default()
        };
        // Written only when not the default, so resolved configs without them stay unchanged.
        if let FeatureMap::Scattering { j, angles } = d.features {
            raw.features = Some(Features::Scattering);
            raw.scattering_j = (j != DEFAULT_SCATTERING_J).then(|| int(j));
            raw.scattering_angles = (angles != DEFAULT_SCATTERING_ANGLES).then(|| int(angles));
            raw.scattering_input_mean = d.scattering_input.as_ref().map(|(m, _)| m.clone());
            raw.scattering_input_std = d.scattering_input.as_ref().map(|(_, s)| s.clone());
        }
        let set_test = |raw: &mut RawData, test: &TestSet| match test {
            TestSet::File(p) => raw.test_path = Some(path_string(p)),
            TestSet::Fraction(f) => raw.test_fraction = Some(*f),
        };
        match &d.source {
            DataSource::Standard { dir, .. } => raw.path = dir.as_deref().map(path_string),
            DataSource::Libsvm { path, test } => {
                raw.path = Some(path_string(path));
                set_test(&mut raw, test);
            }
            DataSource::Csv {
                path,
                test,
                label_column,
                header,
            } => {
                raw.path = Some(path_string(path));
                set_test(&mut raw, test);
                raw.label_column = Some(int(*label_column));
                raw.header = Some(*header);
            }
            DataSource::Synthetic(s) => raw.synthetic = Some(raw_synthetic(s)),
        }
        raw
    }

    fn raw_model(&self) -> RawModel {
        let mut raw = RawModel {
            architecture: Some(self.model.architecture.kind()),
            // Written only when not the default, so earlier resolved configs read back the same.
            loss: (self.model.loss != Loss::CrossEntropy).then_some(self.model.loss),
            l2: Some(self.model.l2),
            init_from: self
                .model
                .init_from
                .as_ref()
                .map(|p| p.display().to_string()),
            freeze: (!self.model.freeze.is_empty()).then(|| self.model.freeze.clone()),
            ..RawModel::default()
        };
        match &self.model.architecture {
            ModelArchitecture::Logistic
            | ModelArchitecture::MnistCnn
            | ModelArchitecture::CifarCnn
            | ModelArchitecture::Resnet20Gn => {}
            ModelArchitecture::Mlp { hidden, activation } => {
                raw.hidden = Some(hidden.iter().map(|&h| int(h)).collect());
                raw.activation = Some(*activation);
            }
            ModelArchitecture::Cnn { layers } => {
                raw.layers = Some(layers.iter().map(raw_layer).collect());
            }
        }
        raw
    }

    fn raw_train(&self) -> RawTrain {
        let t = &self.train;
        let (epochs, steps) = match t.length {
            TrainLength::Epochs(e) => (Some(int(e)), None),
            TrainLength::Steps(s) => (None, Some(int(s))),
        };
        let (batch_size, expected_batch_size) = match t.sampler {
            Sampler::Poisson {
                expected_batch_size,
            } => (None, Some(int(expected_batch_size))),
            Sampler::Shuffle { batch_size }
            | Sampler::FixedSize { batch_size }
            | Sampler::FixedOrder { batch_size }
            | Sampler::BallsInBins { batch_size } => (Some(int(batch_size)), None),
        };
        let (eval_every_epochs, eval_every_steps) = split_every(t.eval_every);
        RawTrain {
            epochs,
            steps,
            sampler: Some(t.sampler.kind()),
            batch_size,
            expected_batch_size,
            optimizer: Some(t.optimizer.kind()),
            momentum: match t.optimizer {
                OptimizerSpec::Sgd
                | OptimizerSpec::AdagradNorm { .. }
                | OptimizerSpec::Adam { .. } => None,
                OptimizerSpec::Momentum { momentum }
                | OptimizerSpec::BiasCorrectedMomentum { beta: momentum } => Some(momentum),
            },
            adagrad_norm: match t.optimizer {
                OptimizerSpec::AdagradNorm {
                    b0_sq,
                    nu,
                    beta,
                    beta_period,
                    norm_source,
                } => Some(RawAdagradNorm {
                    b0_sq: Some(b0_sq),
                    nu: Some(nu),
                    beta: Some(beta),
                    beta_period: beta_period.map(int),
                    norm_source: Some(norm_source),
                }),
                _ => None,
            },
            adam: match t.optimizer {
                OptimizerSpec::Adam {
                    beta1,
                    beta2,
                    stability_constant,
                } => Some(RawAdam {
                    beta1: Some(beta1),
                    beta2: Some(beta2),
                    stability_constant: Some(stability_constant),
                }),
                _ => None,
            },
            learning_rate: Some(t.learning_rate),
            eval_every_epochs,
            eval_every_steps,
            threads: Some(match t.threads {
                Threads::Auto => RawThreads::Auto(AutoWord::Auto),
                Threads::Count(n) => RawThreads::Count(int(n)),
            }),
            lr_schedule: Some(raw_lr_schedule(&t.lr_schedule)),
            eval_train_set: Some(t.eval_train_set),
            eval_gradient_error: t.eval_gradient_error.then_some(true),
            ema_decay: t.ema_decay,
            augmentation: t.augmentation.map(|a| RawAugmentation {
                multiplicity: Some(int(a.multiplicity)),
                crop_padding: Some(int(a.crop_padding)),
                horizontal_flip: Some(a.horizontal_flip),
            }),
        }
    }
}

fn split_every(e: Every) -> (Option<i64>, Option<i64>) {
    match e {
        Every::Epochs(n) => (Some(int(n)), None),
        Every::Steps(n) => (None, Some(int(n))),
    }
}

fn raw_lr_schedule(s: &LrSchedule) -> RawLrSchedule {
    let mut raw = RawLrSchedule {
        kind: Some(s.kind()),
        ..RawLrSchedule::default()
    };
    match *s {
        LrSchedule::Constant => {}
        LrSchedule::Step { factor, every } | LrSchedule::Exponential { factor, every } => {
            raw.factor = Some(factor);
            (raw.every_epochs, raw.every_steps) = split_every(every);
        }
        LrSchedule::Cosine {
            final_learning_rate,
        }
        | LrSchedule::SqrtToZero {
            final_learning_rate,
        } => raw.final_learning_rate = Some(final_learning_rate),
        LrSchedule::InvSqrt { a, c } => {
            raw.a = Some(a);
            raw.c = Some(c);
        }
    }
    raw
}

fn raw_synthetic(s: &SyntheticSpec) -> RawSynthetic {
    match *s {
        SyntheticSpec::GaussianMixture {
            n_train,
            n_test,
            n_features,
            n_classes,
            separation,
            seed,
        } => RawSynthetic {
            n_train: Some(int(n_train)),
            n_test: Some(int(n_test)),
            n_features: Some(int(n_features)),
            n_classes: Some(int(n_classes)),
            separation: Some(separation),
            seed: Some(int(seed)),
        },
        SyntheticSpec::TwoCluster {
            n_train,
            n_test,
            n_features,
            separation,
            seed,
        } => RawSynthetic {
            n_train: Some(int(n_train)),
            n_test: Some(int(n_test)),
            n_features: Some(int(n_features)),
            n_classes: None,
            separation: Some(separation),
            seed: Some(int(seed)),
        },
        SyntheticSpec::LogisticSynthetic {
            n_train,
            n_test,
            n_features,
            seed,
        } => RawSynthetic {
            n_train: Some(int(n_train)),
            n_test: Some(int(n_test)),
            n_features: Some(int(n_features)),
            n_classes: None,
            separation: None,
            seed: Some(int(seed)),
        },
    }
}

fn raw_layer(l: &LayerSpec) -> RawLayer {
    let base = |kind: LayerKind| RawLayer {
        kind: Some(kind),
        ..RawLayer::default()
    };
    match *l {
        LayerSpec::Conv2d {
            out_channels,
            kernel_size,
            stride,
            padding,
            weight_standardization,
        } => RawLayer {
            out_channels: Some(int(out_channels)),
            kernel_size: Some(int(kernel_size)),
            stride: Some(int(stride)),
            padding: Some(int(padding)),
            weight_standardization: Some(weight_standardization),
            ..base(LayerKind::Conv2d)
        },
        LayerSpec::MaxPool2d {
            kernel_size,
            stride,
        } => RawLayer {
            kernel_size: Some(int(kernel_size)),
            stride: Some(int(stride)),
            ..base(LayerKind::MaxPool2d)
        },
        LayerSpec::AvgPool2d {
            kernel_size,
            stride,
        } => RawLayer {
            kernel_size: Some(int(kernel_size)),
            stride: Some(int(stride)),
            ..base(LayerKind::AvgPool2d)
        },
        LayerSpec::Flatten => base(LayerKind::Flatten),
        LayerSpec::Dense { out_features } => RawLayer {
            out_features: Some(int(out_features)),
            ..base(LayerKind::Dense)
        },
        LayerSpec::GroupNorm { groups } => RawLayer {
            groups: Some(int(groups)),
            ..base(LayerKind::GroupNorm)
        },
        LayerSpec::Relu => base(LayerKind::Relu),
        LayerSpec::Tanh => base(LayerKind::Tanh),
        LayerSpec::ResidualSave => base(LayerKind::ResidualSave),
        LayerSpec::ResidualAdd => base(LayerKind::ResidualAdd),
    }
}

/// `[accelerated]` with every applicable key explicit.
fn raw_accelerated(a: &AcceleratedSpec) -> RawAccelerated {
    let (feature_l1_bound, l1_clip_norm) = match a.sensitivity {
        SensitivitySpec::FeatureBound { feature_l1_bound } => (Some(feature_l1_bound), None),
        SensitivitySpec::L1Clip { l1_clip_norm } => (None, Some(l1_clip_norm)),
    };
    let masg = a.method == AcceleratedMethodKind::Masg;
    RawAccelerated {
        method: Some(a.method),
        epsilon: Some(a.epsilon),
        step_constant: Some(a.step_constant),
        smoothness: Some(match a.smoothness {
            SmoothnessSpec::Gram => RawNumberOrWord::Word("gram".into()),
            SmoothnessSpec::Logistic => RawNumberOrWord::Word("logistic".into()),
            SmoothnessSpec::Value(l) => RawNumberOrWord::Number(l),
        }),
        momentum: match (a.method, a.momentum) {
            (AcceleratedMethodKind::Gd, _) => None,
            (_, MomentumSpec::StronglyConvex) => {
                Some(RawNumberOrWord::Word("strongly_convex".into()))
            }
            (_, MomentumSpec::Value(b)) => Some(RawNumberOrWord::Number(b)),
        },
        noise_dividing: Some(a.noise_dividing),
        select_steps: a.noise_dividing.then_some(a.select_steps),
        bound_constants: a.noise_dividing.then_some(a.bound_constants),
        initial_error: a.noise_dividing.then_some(a.initial_error),
        init_value: Some(a.init_value),
        sensitivity: Some(match a.sensitivity {
            SensitivitySpec::FeatureBound { .. } => L1SensitivityKind::FeatureBound,
            SensitivitySpec::L1Clip { .. } => L1SensitivityKind::L1Clip,
        }),
        feature_l1_bound,
        l1_clip_norm,
        laplace_parameter: Some(a.laplace_parameter),
        masg_p: masg.then_some(i64::from(a.masg_p)),
        masg_first_stage: if masg {
            a.masg_first_stage.map(int)
        } else {
            None
        },
        rdp_delta: Some(a.rdp_delta),
    }
}
