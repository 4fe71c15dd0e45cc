//! One seed of one experiment: the private step loop, evaluation and the seed's summary.
//!
//! One private step (see `ARCHITECTURE.md`):
//!
//! ```text
//! σ_t, η_t  = plan (pure functions of t)
//! batch     = sampler.next(rng_sampling)              Poisson by default; may be empty
//! grads     = model.per_sample(params, batch)         norms and weighted sums, no [B, P] matrix
//!             (with [train.augmentation]: K views of each example, g_i = mean of its views')
//! release   = plan.clip.privatize(state, grads, σ_t, rng_noise)   the policy; state → next step
//! g         = release.sum / expected_batch_size       never the realised batch size
//! g        += λ θ                                     L2 penalty: data-independent, after noise
//! optimizer.step(params, g, η_t)
//! ema       = d_t·ema + (1 − d_t)·params                [train.ema_decay]: post-processing
//! ledger.record(sampling(release.events))
//! ```
//!
//! The loop reads as its phases: `DpSgdSeed::set_up` (parameters, optimizer and clipping
//! state, sampler, the seed's streams), `DpSgdSeed::step` (one private step, above),
//! `DpSgdSeed::evaluate` (one metrics row) and `DpSgdSeed::finish` (the summary). Streams
//! and the noise source are in `seed.rs`.

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Instant;

use ndarray::{Array1, Array2};

use super::TrainError;
use super::checkpoint::{self, Checkpointing, NoiseState, SeedState, WindowState};
use super::look_ahead::{Gathered, LookAhead};
use super::metrics::{ClipWindow, MetricsRow, SeedStatus, SummaryRow};
use super::prepare::Experiment;
use super::seed::{
    NoiseSource, Observer, STREAM_AUGMENT, STREAM_PARTITION, STREAM_SAMPLING, SeedEnd, SeedResult,
    Snapshot, ema_decay_at, ema_update, stream_rng,
};
use super::update::apply_release;
use crate::config::spec::Sampler as SpecSampler;
use crate::data::Dataset;
use crate::data::augment::{self, ViewSpec};
use crate::data::sampler::{
    BallsInBinsSampler, CyclicPoissonSampler, FixedOrderSampler, FixedSizeSampler, PoissonSampler,
    Sampler, ShuffleSampler,
};
use crate::grad::{GradError, PerSampleGradients};
use crate::privacy::bandmf::{Correlated, CorrelatedNoise};
use crate::privacy::clip::{ClipError, StepContext};
use crate::privacy::event::{DpEvent, EventLedger};

/// The per-sample gradients of an empty (Poisson) batch: all sums are zero vectors.
struct EmptyBatch {
    num_params: usize,
    groups: Vec<(String, std::ops::Range<usize>)>,
}

impl PerSampleGradients for EmptyBatch {
    fn batch_size(&self) -> usize {
        0
    }
    fn num_params(&self) -> usize {
        self.num_params
    }
    fn groups(&self) -> Vec<(String, std::ops::Range<usize>)> {
        self.groups.clone()
    }
    fn norms(&self) -> Array1<f64> {
        Array1::zeros(0)
    }
    fn group_norms(&self) -> Array2<f64> {
        Array2::zeros((0, self.groups.len()))
    }
    fn weighted_sum(&self, _weights: &Array1<f64>) -> Array1<f64> {
        Array1::zeros(self.num_params)
    }
    fn group_weighted_sum(&self, _weights: &Array2<f64>) -> Array1<f64> {
        Array1::zeros(self.num_params)
    }
    fn materialize(&self) -> Result<Array2<f32>, GradError> {
        Ok(Array2::zeros((0, self.num_params)))
    }
}

fn make_sampler(exp: &Experiment, seed: u64) -> Result<Sampler, TrainError> {
    let (plan, n) = (&exp.plan, exp.data.train.len());
    let sample_rate = plan.sample_rate;
    Ok(match plan.sampler {
        SpecSampler::Poisson { .. } => match &plan.bandmf {
            // b-min-separated Poisson sampling; one band draws no groups (plain Poisson).
            Some(m) => Sampler::CyclicPoisson(CyclicPoissonSampler::new(
                n,
                m.bands as usize,
                m.group_sample_rate.unwrap_or(sample_rate),
                &mut stream_rng(seed, STREAM_PARTITION),
            )?),
            None => Sampler::Poisson(PoissonSampler::new(n, sample_rate)?),
        },
        SpecSampler::Shuffle { batch_size } => {
            Sampler::Shuffle(ShuffleSampler::new(n, batch_size)?)
        }
        SpecSampler::FixedSize { batch_size } => {
            Sampler::FixedSize(FixedSizeSampler::new(n, batch_size)?)
        }
        SpecSampler::BallsInBins { .. } => Sampler::BallsInBins(BallsInBinsSampler::new(
            n,
            plan.sampler.steps_per_epoch(n).unwrap_or(1) as usize,
            &mut stream_rng(seed, STREAM_PARTITION),
        )?),
        SpecSampler::FixedOrder { batch_size } => Sampler::FixedOrder(FixedOrderSampler::new(
            n,
            batch_size,
            &mut stream_rng(seed, STREAM_PARTITION),
        )?),
    })
}

/// Train one DP-SGD (or non-private) seed of `exp`. Progress goes to `observer`; `cancel` stops
/// it between steps. `[accelerated]` experiments have their own loop (`train::train_seed` picks).
pub fn train_seed(
    exp: &Experiment,
    seed: u64,
    observer: &dyn Observer,
    cancel: &AtomicBool,
) -> Result<SeedEnd, TrainError> {
    train_seed_checkpointed(exp, seed, observer, cancel, None, None)
}

/// [`train_seed`] that writes checkpoints as `checkpoints` says (every N steps, and when
/// interrupted) and, given `resume` (a checkpoint of this seed that passed
/// [`checkpoint::validate`]), continues from it instead of step 0. The result is the same bytes
/// as an uninterrupted run's (but `seconds`), except with secure noise.
pub fn train_seed_checkpointed(
    exp: &Experiment,
    seed: u64,
    observer: &dyn Observer,
    cancel: &AtomicBool,
    checkpoints: Option<&Checkpointing>,
    resume: Option<SeedState>,
) -> Result<SeedEnd, TrainError> {
    let total = exp.plan.steps;
    let (mut run, mut rows) = match resume {
        None => {
            let run = DpSgdSeed::set_up(exp, seed)?;
            let first = run.evaluate(0, None, None)?;
            observer.on_eval(seed, &first, total);
            (run, vec![first])
        }
        Some(state) => {
            let resumed = DpSgdSeed::resume(exp, seed, state)?;
            observer.on_step(seed, resumed.0.step, total);
            resumed
        }
    };
    let start = run.step;
    let mut next_eval = exp
        .plan
        .eval_steps()
        .into_iter()
        .filter(|&s| s > start)
        .peekable();

    let mut status = SeedStatus::Completed;
    for t in start..total {
        if cancel.load(Ordering::Relaxed) {
            if let Some(c) = checkpoints.filter(|c| c.on_interrupt && t > start) {
                run.save_checkpoint(c, &rows)?;
            }
            return Ok(SeedEnd::Interrupted);
        }
        // On two or more threads, the next step's rows are gathered beside this step (look_ahead).
        let look_ahead = (t + 1 < total && exp.spec.train.augmentation.is_none())
            .then(|| {
                LookAhead::new(
                    &run.sampler,
                    &run.rng_sampling,
                    exp.data.train.features.view(),
                )
            })
            .flatten();
        let stepped = match look_ahead {
            Some(look_ahead) => {
                let (stepped, gathered) = rayon::join(|| run.step(t), || look_ahead.gather());
                run.ahead = Some(gathered);
                stepped
            }
            None => run.step(t),
        };
        let Some(batch_size) = stepped? else {
            status = SeedStatus::Diverged;
            break;
        };
        run.step = t + 1;
        observer.on_step(seed, t + 1, total);
        if next_eval.peek() == Some(&(t + 1)) {
            next_eval.next();
            if run.params.iter().any(|v| !v.is_finite()) {
                status = SeedStatus::Diverged;
                break;
            }
            let train_loss = run.take_train_loss();
            let row = run.evaluate(t + 1, train_loss, Some(batch_size))?;
            if !(row.test_loss.is_finite()) {
                status = SeedStatus::Diverged;
                break;
            }
            observer.on_eval(seed, &row, total);
            // Rows after step 0 are evaluations 1, 2, ...: every k-th keeps its parameters.
            if let Some(k) = exp.spec.output.save_model_every_evals
                && (rows.len() as u64).is_multiple_of(k)
            {
                run.snapshots.push(Snapshot {
                    step: t + 1,
                    test_accuracy: row.test_accuracy,
                    params: run.params.clone(),
                });
            }
            rows.push(row);
            run.window.reset();
        }
        if let Some(c) = checkpoints
            && c.every.is_some_and(|every| (t + 1).is_multiple_of(every))
            && t + 1 < total
        {
            run.save_checkpoint(c, &rows)?;
        }
    }
    run.finish(rows, status)
        .map(|r| SeedEnd::Finished(Box::new(r)))
}

/// The state of one DP-SGD seed between steps: everything a step reads and writes.
struct DpSgdSeed<'a> {
    exp: &'a Experiment,
    seed: u64,
    started: Instant,
    /// Seconds trained before a resumed checkpoint (0 for a fresh seed).
    seconds_before: f64,
    /// Steps taken.
    step: u64,
    params: Array1<f32>,
    opt_state: crate::optim::OptimizerState,
    sampler: Sampler,
    rng_sampling: rand_chacha::ChaCha12Rng,
    rng_noise: NoiseSource,
    /// The augmented views' draws (used only with `[train.augmentation]`).
    rng_augment: rand_chacha::ChaCha12Rng,
    /// The exponential moving average of the parameters (`train.ema_decay`).
    ema: Option<Array1<f32>>,
    /// The parameters at every k-th evaluation (`output.save_model_every_evals`).
    snapshots: Vec<Snapshot>,
    clip_state: crate::privacy::clip::ClipState,
    /// BandMF's noise state (`noise.mechanism = "bandmf"`).
    correlated: Option<CorrelatedNoise>,
    ledger: EventLedger,
    window: ClipWindow,
    /// The batch's indices (reused buffer) and the parameter groups of an empty batch.
    indices: Vec<usize>,
    /// This step's rows, gathered during the previous step (`look_ahead`), if they were.
    ahead: Option<Gathered>,
    groups: Vec<(String, std::ops::Range<usize>)>,
    /// Sum and count of per-example training losses since the last evaluation.
    loss_sum: f64,
    loss_count: usize,
}

impl<'a> DpSgdSeed<'a> {
    /// Set-up: initial parameters, optimizer and clipping-policy state, the sampler and the
    /// seed's sampling and noise streams.
    fn set_up(exp: &'a Experiment, seed: u64) -> Result<Self, TrainError> {
        let (plan, model) = (&exp.plan, &exp.model);
        let params = exp.initial_params(seed);
        let ema = exp.spec.train.ema_decay.map(|_| params.clone());
        let opt_state = plan.optimizer.init_state(params.len());
        let sampler = make_sampler(exp, seed)?;
        let rng_noise = NoiseSource::of(exp, seed).map_err(|e| TrainError::Step {
            seed,
            step: 0,
            reason: e.to_string(),
        })?;
        Ok(Self {
            exp,
            seed,
            started: Instant::now(),
            seconds_before: 0.0,
            step: 0,
            params,
            opt_state,
            sampler,
            rng_sampling: stream_rng(seed, STREAM_SAMPLING),
            rng_noise,
            rng_augment: stream_rng(seed, STREAM_AUGMENT),
            ema,
            snapshots: Vec::new(),
            clip_state: plan.clip.init_state(model.num_params()),
            correlated: plan
                .bandmf
                .as_ref()
                .map(|m| CorrelatedNoise::new(&m.strategy)),
            ledger: exp.plan.initial_ledger(),
            window: ClipWindow::default(),
            indices: Vec::new(),
            ahead: None,
            groups: model.groups().to_vec(),
            loss_sum: 0.0,
            loss_count: 0,
        })
    }

    /// Set-up from a checkpoint (already checked by [`checkpoint::validate`]): the state of the
    /// seed after `state.step` steps, and the metrics rows written until then.
    fn resume(
        exp: &'a Experiment,
        seed: u64,
        state: SeedState,
    ) -> Result<(Self, Vec<MetricsRow>), TrainError> {
        let refuse = |reason: String| TrainError::Step {
            seed,
            step: state.step,
            reason: format!("checkpoint: {reason}"),
        };
        checkpoint::validate(exp, seed, &state).map_err(|e| refuse(e.to_string()))?;
        let mut run = Self::set_up(exp, seed)?;
        run.seconds_before = state.seconds;
        run.step = state.step;
        run.params = Array1::from(state.params);
        run.opt_state = state.optimizer;
        run.clip_state = state.clip;
        if let (Sampler::Shuffle(s), Some(saved)) = (&mut run.sampler, state.shuffle) {
            s.set_position(saved.permutation, saved.cursor, saved.epoch)
                .map_err(refuse)?;
        }
        match &mut run.sampler {
            Sampler::CyclicPoisson(s) => s.set_step(state.step),
            Sampler::FixedOrder(s) => s.set_step(state.step),
            Sampler::BallsInBins(s) => s.set_step(state.step),
            _ => {}
        }
        if let (Some(noise), Some(history)) = (&mut run.correlated, state.correlated_noise) {
            noise
                .restore(history, exp.model.num_params())
                .map_err(|e| refuse(e.to_string()))?;
        }
        run.rng_sampling.set_word_pos(state.sampling_word_pos);
        run.rng_augment.set_word_pos(state.augment_word_pos);
        run.ema = state.ema.map(Array1::from);
        run.snapshots = state.snapshots;
        match (&mut run.rng_noise, state.noise) {
            (NoiseSource::Seeded(rng), NoiseState::Seeded { word_pos }) => {
                rng.set_word_pos(word_pos)
            }
            (NoiseSource::Secure(_), NoiseState::Secure) => {}
            _ => return Err(refuse("a noise mode other than the config's".into())),
        }
        run.ledger = state.ledger;
        let w = state.window;
        run.window = ClipWindow {
            last: w.last,
            private_sum: w.private_sum,
            private_steps: w.private_steps,
            clipped: usize::try_from(w.clipped).map_err(|e| refuse(e.to_string()))?,
            examples: usize::try_from(w.examples).map_err(|e| refuse(e.to_string()))?,
            gradient_error_sum: w.gradient_error_sum,
            gradient_error_steps: w.gradient_error_steps,
            gradient_error_total: w.gradient_error_total,
            gradient_error_total_steps: w.gradient_error_total_steps,
        };
        run.loss_sum = state.loss_sum;
        run.loss_count = usize::try_from(state.loss_count).map_err(|e| refuse(e.to_string()))?;
        Ok((run, state.rows))
    }

    /// The seed's whole state after `self.step` steps, with the rows written so far.
    fn snapshot(&self, rows: &[MetricsRow]) -> SeedState {
        let w = &self.window;
        SeedState {
            step: self.step,
            seconds: self.seconds_before + self.started.elapsed().as_secs_f64(),
            params: self.params.to_vec(),
            optimizer: self.opt_state.clone(),
            clip: self.clip_state.clone(),
            shuffle: checkpoint::shuffle_state(&self.sampler),
            sampling_word_pos: self.rng_sampling.get_word_pos(),
            augment_word_pos: self.rng_augment.get_word_pos(),
            ema: self.ema.as_ref().map(|e| e.to_vec()),
            snapshots: self.snapshots.clone(),
            noise: match &self.rng_noise {
                NoiseSource::Seeded(rng) => NoiseState::Seeded {
                    word_pos: rng.get_word_pos(),
                },
                NoiseSource::Secure(_) => NoiseState::Secure,
            },
            ledger: self.ledger.clone(),
            rows: rows.to_vec(),
            window: WindowState {
                last: w.last,
                private_sum: w.private_sum,
                private_steps: w.private_steps,
                clipped: w.clipped as u64,
                examples: w.examples as u64,
                gradient_error_sum: w.gradient_error_sum,
                gradient_error_steps: w.gradient_error_steps,
                gradient_error_total: w.gradient_error_total,
                gradient_error_total_steps: w.gradient_error_total_steps,
            },
            loss_sum: self.loss_sum,
            loss_count: self.loss_count as u64,
            iterates: None,
            correlated_noise: self
                .correlated
                .as_ref()
                .map(|c| c.history().iter().cloned().collect()),
        }
    }

    /// Write a checkpoint of the seed as it is now.
    fn save_checkpoint(&self, c: &Checkpointing, rows: &[MetricsRow]) -> Result<(), TrainError> {
        let bytes = checkpoint::encode(&self.snapshot(rows), c.resolved_config, self.seed);
        c.sink
            .save(self.seed, &bytes)
            .map_err(|e| self.step_err(self.step, format!("writing a checkpoint: {e}")))
    }

    fn step_err(&self, step: u64, reason: String) -> TrainError {
        TrainError::Step {
            seed: self.seed,
            step,
            reason,
        }
    }

    /// One private step t: sample, per-sample gradients, the clipping policy's release (clip,
    /// sum, noise, statistics, state update), record its events, the update. Returns the
    /// realised batch size, or `None` when the step diverged (non-finite loss, norm or update).
    fn step(&mut self, t: u64) -> Result<Option<usize>, TrainError> {
        let (plan, model, train) = (&self.exp.plan, &self.exp.model, &self.exp.data.train);
        let sigma = plan.noise_multiplier_at(t);
        let lr = plan.lr.at(t);
        self.sampler
            .next_batch_into(&mut self.rng_sampling, &mut self.indices);
        let batch_size = self.indices.len();
        let ahead = self.ahead.take();

        let x;
        let y: Vec<usize>;
        let batch_grads;
        let empty;
        let grads: &dyn PerSampleGradients = if self.indices.is_empty() {
            batch_grads = None;
            empty = EmptyBatch {
                num_params: model.num_params(),
                groups: self.groups.clone(),
            };
            &empty
        } else {
            let (views, spec) = self.views();
            x = match (spec, &self.exp.data.train_mirrored) {
                // Scattering features: each view is the example's row or its mirror's.
                (Some(_), Some(mirrored)) => augment::flip_views(
                    train.features.view(),
                    mirrored.features.view(),
                    &self.indices,
                    views,
                    &mut self.rng_augment,
                ),
                (Some((shape, spec)), None) => augment::views(
                    crate::data::gather_rows(train.features.view(), &self.indices).view(),
                    shape,
                    spec,
                    &mut self.rng_augment,
                ),
                (None, _) => match ahead {
                    // The same draws, so the same indices; compared all the same.
                    Some(g) if g.indices == self.indices => g.rows,
                    _ => crate::data::gather_rows(train.features.view(), &self.indices),
                },
            };
            y = self
                .indices
                .iter()
                .flat_map(|&i| std::iter::repeat_n(train.labels[i], views))
                .collect();
            batch_grads = Some(
                model
                    .per_sample_views(self.params.view(), x.view(), &y, views)
                    .map_err(|e| self.step_err(t, e.to_string()))?,
            );
            match &batch_grads {
                Some(g) => g,
                None => unreachable!("just set"),
            }
        };
        if let Some(g) = &batch_grads {
            let losses = g.losses();
            let s = losses.sum();
            if !s.is_finite() {
                return Ok(None);
            }
            self.loss_sum += s;
            self.loss_count += losses.len();
        }

        // The paper's non-private AdaGrad-norm mode: ‖ḡ‖² of the clipped mean before noise.
        let clean_norm_sq = match (plan.clean_norm, plan.clip_norm) {
            (true, Some(c)) => {
                let w = grads
                    .norms()
                    .mapv(|n| if n > c { c / n } else { 1.0 } / plan.expected_batch_size);
                Some(grads.weighted_sum(&w).iter().map(|v| v * v).sum::<f64>())
            }
            _ => None,
        };
        // `train.eval_gradient_error`: the raw batch sum Σ_i g_i, to compare with the release.
        let raw_sum = self
            .exp
            .spec
            .train
            .eval_gradient_error
            .then(|| grads.weighted_sum(&Array1::ones(grads.batch_size())));
        // The clipping policy: clip, sum, noise, any statistic it releases, and its state's
        // update for the next step. A non-private run passes σ = 0 (no noise) and records
        // NonPrivate.
        let ctx = StepContext {
            step: t,
            noise_multiplier: sigma.unwrap_or(0.0),
            expected_batch_size: plan.expected_batch_size,
        };
        let privatized = match &mut self.correlated {
            None => plan
                .clip
                .privatize(&mut self.clip_state, grads, &ctx, &mut self.rng_noise),
            // BandMF: the step's fresh noise z_t becomes w_t = (C⁻¹Z)_t (privacy::bandmf).
            Some(noise) => plan.clip.privatize(
                &mut self.clip_state,
                grads,
                &ctx,
                &mut Correlated {
                    inner: &mut self.rng_noise,
                    noise,
                },
            ),
        };
        let step = match privatized {
            Ok(step) => step,
            Err(ClipError::NonFiniteNorm { .. }) => return Ok(None),
            Err(e) => return Err(self.step_err(t, e.to_string())),
        };
        self.window.record(&step);
        if let Some(raw) = raw_sum {
            let sq: f64 = raw
                .iter()
                .zip(step.release.sum.iter())
                .map(|(a, b)| (a - b) * (a - b))
                .sum();
            self.window
                .record_gradient_error(sq.sqrt() / plan.expected_batch_size);
        }
        let releases = match sigma {
            Some(_) => step.release.events,
            None => vec![DpEvent::NonPrivate],
        };
        self.ledger.record(plan.step_event(t, releases));
        if !apply_release(
            model,
            &mut self.params,
            step.release.sum,
            (plan.expected_batch_size, lr),
            &plan.optimizer,
            &mut self.opt_state,
            clean_norm_sq,
        ) {
            return Ok(None);
        }
        if let (Some(ema), Some(d)) = (&mut self.ema, self.exp.spec.train.ema_decay) {
            ema_update(ema, &self.params, ema_decay_at(d, t));
        }
        Ok(Some(batch_size))
    }

    /// Views per example, and how to draw them (`None`: the examples as they are).
    fn views(&self) -> (usize, Option<([usize; 3], ViewSpec)>) {
        let Some(a) = self.exp.spec.train.augmentation else {
            return (1, None);
        };
        let shape = match self.exp.data.train.sample_shape[..] {
            [c, h, w] => [c, h, w],
            // Refused when the experiment is built (`prepare::check_augmentation`).
            _ => unreachable!("[train.augmentation] on data that are not images"),
        };
        let spec = ViewSpec {
            views: a.multiplicity,
            crop_padding: a.crop_padding,
            horizontal_flip: a.horizontal_flip,
        };
        (a.multiplicity, Some((shape, spec)))
    }

    /// The mean training loss since the last evaluation, and a fresh window for the next one.
    fn take_train_loss(&mut self) -> Option<f64> {
        let train_loss = (self.loss_count > 0).then(|| self.loss_sum / self.loss_count as f64);
        self.loss_sum = 0.0;
        self.loss_count = 0;
        train_loss
    }

    /// Evaluation: the metrics row after `step` steps (test, validation and optionally training
    /// set, ε so far, the step's σ, clip norm and noise std, the clipping window).
    fn evaluate(
        &self,
        step: u64,
        train_loss: Option<f64>,
        batch_size: Option<usize>,
    ) -> Result<MetricsRow, TrainError> {
        let (exp, plan, window) = (self.exp, &self.exp.plan, &self.window);
        let score = |params: &Array1<f32>, ds: &Dataset| {
            exp.model
                .evaluate(params.view(), ds.features.view(), &ds.labels)
                .map_err(|e| self.step_err(step, e.to_string()))
        };
        let on = |ds: &Dataset| score(&self.params, ds);
        let t_last = step.saturating_sub(1);
        let (test_loss, test_accuracy) = on(&exp.data.test)?;
        let (validation_loss, validation_accuracy) = match &exp.data.validation {
            Some(v) => {
                let (l, a) = on(v)?;
                (Some(l), Some(a))
            }
            None => (None, None),
        };
        let (train_set_loss, train_set_accuracy) = if exp.spec.train.eval_train_set {
            let (l, a) = on(&exp.data.train)?;
            (Some(l), Some(a))
        } else {
            (None, None)
        };
        let epsilon = match plan.epsilon_of(&self.ledger) {
            None => None,
            Some(r) => Some(r.map_err(|e| self.step_err(step, e.to_string()))?.epsilon),
        };
        // The averaged parameters, scored like the raw ones (post-processing of the releases).
        let (ema_test, ema_validation_accuracy) = match &self.ema {
            None => (None, None),
            Some(ema) => {
                let test = score(ema, &exp.data.test)?;
                let validation = match &exp.data.validation {
                    Some(v) => Some(score(ema, v)?.1),
                    None => None,
                };
                (Some(test), validation)
            }
        };
        let sigma = plan.noise_multiplier_at(t_last);
        // Before any step: the first step's clip norm and gradient noise.
        let (clip_norm, noise_std) = match window.last {
            Some((c, std)) => (c, sigma.map(|_| std)),
            None => (
                plan.clip_norm,
                sigma
                    .zip(plan.clip_norm)
                    .map(|(s, c)| plan.clip.gradient_noise_multiplier(s).unwrap_or(s) * c),
            ),
        };
        Ok(MetricsRow {
            seed: self.seed,
            step,
            epoch: step as f64 / plan.steps_per_epoch,
            lr: plan.lr.at(t_last),
            noise_multiplier: sigma,
            noise_std,
            clip_norm,
            batch_size,
            epsilon,
            delta: plan.privacy.as_ref().map(|p| p.delta),
            train_loss,
            test_loss,
            test_accuracy,
            validation_loss,
            validation_accuracy,
            clipped_fraction_private: (window.private_steps > 0)
                .then(|| window.private_sum / window.private_steps as f64),
            clipped_fraction_nonprivate: (window.examples > 0)
                .then(|| window.clipped as f64 / window.examples as f64),
            objective: None,
            excess_risk: None,
            laplace_scale: None,
            step_epsilon: None,
            step_size: None,
            momentum: None,
            stage: None,
            train_set_loss,
            train_set_accuracy,
            ema_test_loss: ema_test.map(|t| t.0),
            ema_test_accuracy: ema_test.map(|t| t.1),
            ema_validation_accuracy,
            gradient_error_nonprivate: exp.spec.train.eval_gradient_error.then(|| {
                (window.gradient_error_steps > 0)
                    .then(|| window.gradient_error_sum / window.gradient_error_steps as f64)
            }),
        })
    }

    /// The seed's end: final and best accuracy, ε of the whole ledger, the summary row.
    fn finish(self, rows: Vec<MetricsRow>, status: SeedStatus) -> Result<SeedResult, TrainError> {
        let plan = &self.exp.plan;
        let last = rows
            .last()
            .cloned()
            .ok_or_else(|| self.step_err(0, "no evaluation".into()))?;
        let best = rows
            .iter()
            .map(|r| r.test_accuracy)
            .fold(f64::NEG_INFINITY, f64::max);
        let report = match plan.epsilon_of(&self.ledger) {
            None => None,
            Some(r) => Some(r.map_err(|e| self.step_err(last.step, e.to_string()))?),
        };
        let privacy = plan.privacy.as_ref();
        let summary = SummaryRow {
            seed: self.seed,
            status,
            steps: last.step,
            epochs: last.epoch,
            final_test_accuracy: last.test_accuracy,
            best_test_accuracy: best,
            final_test_loss: last.test_loss,
            final_train_loss: last.train_loss,
            final_validation_accuracy: last.validation_accuracy,
            epsilon: report.as_ref().map(|r| r.epsilon),
            delta: privacy.map(|p| p.delta),
            order: report.as_ref().and_then(|r| r.order),
            accountant: privacy.map(|p| p.accountant.name().to_string()),
            noise_multiplier: privacy.map(|p| p.noise_multiplier),
            epsilon_guaranteed: privacy.is_some_and(|p| p.epsilon_guaranteed),
            noise_mode: match privacy {
                None => "none".into(),
                Some(_) => self.rng_noise.mode().into(),
            },
            final_train_set_loss: last.train_set_loss,
            seconds: self.seconds_before + self.started.elapsed().as_secs_f64(),
            final_excess_risk: None,
            optimum_objective: None,
            smoothness: None,
            epsilon_rdp: None,
            rdp_delta: None,
            final_ema_test_accuracy: last.ema_test_accuracy,
            mean_gradient_error_nonprivate: self.exp.spec.train.eval_gradient_error.then(|| {
                let w = &self.window;
                (w.gradient_error_total_steps > 0)
                    .then(|| w.gradient_error_total / w.gradient_error_total_steps as f64)
            }),
        };
        Ok(SeedResult {
            rows,
            summary,
            ledger: self.ledger,
            params: Some(self.params),
            ema_params: self.ema,
            snapshots: self.snapshots,
        })
    }
}
