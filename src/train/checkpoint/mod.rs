//! Mid-run checkpoints of one seed (room: `train`): what a seed carries between steps
//! ([`SeedState`]), its file format, and the checks that a checkpoint belongs to this run.
//!
//! A checkpoint holds everything the next step reads, so a seed resumed from it continues bit for
//! bit as if it had never stopped: the parameters, the optimizer's state, the clipping policy's
//! state ([`ClipState`]: the quantile policy's C_t, DC-SGD's C_t and R_t, AdaCliP's m_t and s_t),
//! the shuffling sampler's permutation and position, the word positions of the seed's ChaCha12
//! sampling and noise streams (the noise vectors are drawn afresh from the noise stream at every
//! step, so its position is the noise source's whole state), the privacy ledger, the metrics rows
//! written so far, the open evaluation window (training loss, clipping counts) and the step;
//! with `[train.augmentation]` the views stream's position, with `train.ema_decay` the averaged
//! parameters, with `output.save_model_every_evals` the parameters kept so far, and with
//! `noise.mechanism = "bandmf"` the last b − 1 correlated noise vectors (they depend on every
//! draw since step 0, so the stream position alone cannot restore them).
//! With `privacy.secure_noise = true` there is no noise stream to save: a resumed seed draws
//! fresh OS-seeded noise (not byte-identical, as secure runs never are). An `[accelerated]` seed
//! saves its iterates (x_t, x_{t−1}, the EMA) instead of parameters, optimizer and clipping
//! state, with the same streams, ledger and rows.
//!
//! Format (version [`FORMAT_VERSION`]), little-endian:
//!
//! ```text
//! magic "DPXCKPT\0" | format version u32 | MD5 of everything after it (16 bytes) |
//! dpx version | build commit | MD5(resolved config.toml ‖ seed) | seed | the state (codec.rs)
//! ```
//!
//! A file of another format version, dpx version or commit, config or seed is refused
//! ([`CheckpointError::Foreign`]); one whose checksum or contents do not hold is
//! [`CheckpointError::Damaged`]. Writing the file (atomically, user-only permissions) and what
//! to do on either error is the caller's (`cli/run.rs`).

pub mod codec;

use md5::{Digest, Md5};

use self::codec::{Damaged, Reader, Writer};
use super::metrics::MetricsRow;
use super::prepare::Experiment;
use crate::data::sampler::Sampler;
use crate::optim::OptimizerState;
use crate::privacy::clip::ClipState;
use crate::privacy::clip::adaclip::AdaClipState;
use crate::privacy::clip::dcsgd::DcsgdState;
use crate::privacy::event::EventLedger;

/// The format version this build writes and reads.
pub const FORMAT_VERSION: u32 = 4;

const MAGIC: &[u8; 8] = b"DPXCKPT\0";

/// The dpx version and build commit a checkpoint is written by (and must be read by).
pub fn dpx_build() -> (&'static str, &'static str) {
    (env!("CARGO_PKG_VERSION"), env!("DPX_GIT_COMMIT"))
}

/// The fingerprint of one seed of one experiment: MD5 of the resolved config (the text saved as
/// `config.toml`) followed by the seed.
pub fn fingerprint(resolved_config: &str, seed: u64) -> [u8; 16] {
    let mut h = Md5::new();
    h.update(resolved_config.as_bytes());
    h.update(seed.to_le_bytes());
    h.finalize().into()
}

/// Where the noise stream is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NoiseState {
    /// The word position of the seed's ChaCha12 noise stream.
    Seeded { word_pos: u128 },
    /// Secure noise: nothing saved; a resumed seed draws fresh noise.
    Secure,
}

/// The shuffling sampler's position (the other samplers keep nothing between steps).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ShuffleState {
    pub permutation: Vec<usize>,
    pub cursor: Option<usize>,
    pub epoch: u64,
}

/// What the clipping policy did since the last evaluation row (see `run.rs`'s window).
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct WindowState {
    pub last: Option<(Option<f64>, f64)>,
    pub private_sum: f64,
    pub private_steps: u64,
    pub clipped: u64,
    pub examples: u64,
    /// `train.eval_gradient_error`: the sum and count of ‖Σ g_i − s̃_t‖/B over the window, and
    /// over every step so far (zero otherwise).
    pub gradient_error_sum: f64,
    pub gradient_error_steps: u64,
    pub gradient_error_total: f64,
    pub gradient_error_total_steps: u64,
}

/// The iterates of an `[accelerated]` seed (`optim::accelerated::AcceleratedState`).
#[derive(Debug, Clone, PartialEq)]
pub struct Iterates {
    pub x: Vec<f64>,
    pub x_prev: Vec<f64>,
    pub ema: Vec<f64>,
    pub steps: u64,
}

/// Everything one seed carries from step `step − 1` to step `step`. A DP-SGD seed fills every
/// field but `iterates`; an `[accelerated]` seed has `iterates`, the streams, the ledger and the
/// rows, and leaves the DP-SGD fields empty (no parameters, optimizer, clipping or window state).
#[derive(Debug, Clone, PartialEq)]
pub struct SeedState {
    /// Steps taken (the next step is `step`).
    pub step: u64,
    /// Wall-clock seconds trained before this checkpoint.
    pub seconds: f64,
    pub params: Vec<f32>,
    pub optimizer: OptimizerState,
    pub clip: ClipState,
    pub shuffle: Option<ShuffleState>,
    /// Word position of the ChaCha12 sampling stream.
    pub sampling_word_pos: u128,
    /// Word position of the ChaCha12 augmentation stream (0 when views are not drawn).
    pub augment_word_pos: u128,
    /// The parameters' exponential moving average (`train.ema_decay`).
    pub ema: Option<Vec<f32>>,
    /// The parameters kept at every k-th evaluation so far (`output.save_model_every_evals`).
    pub snapshots: Vec<crate::train::seed::Snapshot>,
    pub noise: NoiseState,
    pub ledger: EventLedger,
    pub rows: Vec<MetricsRow>,
    pub window: WindowState,
    pub loss_sum: f64,
    pub loss_count: u64,
    /// `[accelerated]` seeds only.
    pub iterates: Option<Iterates>,
    /// `noise.mechanism = "bandmf"`: the last b − 1 noise vectors, most recent first
    /// (`privacy::bandmf::CorrelatedNoise`); `None` otherwise.
    pub correlated_noise: Option<Vec<Vec<f64>>>,
}

/// Why a checkpoint cannot be used.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum CheckpointError {
    /// Written by another format version, dpx build, config or seed: refused.
    #[error("{0}")]
    Foreign(String),
    /// Not a whole checkpoint (cut short, checksum mismatch, inconsistent contents).
    #[error("damaged: {0}")]
    Damaged(String),
}

impl From<Damaged> for CheckpointError {
    fn from(d: Damaged) -> Self {
        CheckpointError::Damaged(d.to_string())
    }
}

/// Receives a seed's checkpoints as they are written (the CLI writes them to disk).
pub trait CheckpointSink: Sync {
    /// Store `bytes` as seed `seed`'s checkpoint, replacing any earlier one.
    fn save(&self, seed: u64, bytes: &[u8]) -> Result<(), String>;
}

/// When a seed writes checkpoints and where they go.
pub struct Checkpointing<'a> {
    /// Every this many steps (`--checkpoint-every`); `None`: never periodically.
    pub every: Option<u64>,
    /// Also when the run is interrupted (Ctrl-C, SIGTERM) between steps.
    pub on_interrupt: bool,
    /// The resolved config the seeds belong to (see [`fingerprint`]).
    pub resolved_config: &'a str,
    pub sink: &'a dyn CheckpointSink,
}

fn write_clip(w: &mut Writer, c: &ClipState) {
    match c {
        ClipState::Stateless => w.u8(0),
        ClipState::ClipNorm(v) => {
            w.u8(1);
            w.f64(*v);
        }
        ClipState::Dcsgd(s) => {
            w.u8(2);
            w.f64(s.clip_norm);
            w.f64(s.range);
        }
        ClipState::AdaClip(s) => {
            w.u8(3);
            w.f64s(&s.mean.to_vec());
            w.f64s(&s.std.to_vec());
        }
    }
}

fn read_clip(r: &mut Reader) -> Result<ClipState, Damaged> {
    let w = "clipping state";
    Ok(match r.u8(w)? {
        0 => ClipState::Stateless,
        1 => ClipState::ClipNorm(r.f64(w)?),
        2 => ClipState::Dcsgd(DcsgdState {
            clip_norm: r.f64(w)?,
            range: r.f64(w)?,
        }),
        3 => ClipState::AdaClip(AdaClipState {
            mean: r.f64s(w)?.into(),
            std: r.f64s(w)?.into(),
        }),
        t => return Err(r.damaged(format!("{w}: unknown kind {t}"))),
    })
}

/// The checkpoint file of `state` for seed `seed` of the run whose resolved config is
/// `resolved_config`.
pub fn encode(state: &SeedState, resolved_config: &str, seed: u64) -> Vec<u8> {
    let (version, commit) = dpx_build();
    let mut w = Writer::default();
    w.str(version);
    w.str(commit);
    w.bytes(&fingerprint(resolved_config, seed));
    w.u64(seed);
    w.u64(state.step);
    w.f64(state.seconds);
    w.f32s(&state.params);
    let o = &state.optimizer;
    w.f64s(&o.velocity);
    w.u64(o.steps);
    w.f64(o.b_sq);
    w.f64s(&o.second_moment);
    write_clip(&mut w, &state.clip);
    match &state.shuffle {
        None => w.u8(0),
        Some(s) => {
            w.u8(1);
            w.u64s(&s.permutation.iter().map(|&i| i as u64).collect::<Vec<_>>());
            w.opt_u64(s.cursor.map(|c| c as u64));
            w.u64(s.epoch);
        }
    }
    w.u128(state.sampling_word_pos);
    w.u128(state.augment_word_pos);
    match &state.ema {
        None => w.u8(0),
        Some(e) => {
            w.u8(1);
            w.f32s(e);
        }
    }
    w.u64(state.snapshots.len() as u64);
    for s in &state.snapshots {
        w.u64(s.step);
        w.f64(s.test_accuracy);
        w.f32s(&s.params.to_vec());
    }
    match state.noise {
        NoiseState::Seeded { word_pos } => {
            w.u8(0);
            w.u128(word_pos);
        }
        NoiseState::Secure => w.u8(1),
    }
    w.u64(state.ledger.runs().len() as u64);
    for (event, count) in state.ledger.runs() {
        w.event(event);
        w.u64(*count);
    }
    w.u64(state.rows.len() as u64);
    for row in &state.rows {
        w.metrics_row(row);
    }
    let win = &state.window;
    match win.last {
        None => w.u8(0),
        Some((c, std)) => {
            w.u8(1);
            w.opt_f64(c);
            w.f64(std);
        }
    }
    w.f64(win.private_sum);
    w.u64(win.private_steps);
    w.u64(win.clipped);
    w.u64(win.examples);
    w.f64(win.gradient_error_sum);
    w.u64(win.gradient_error_steps);
    w.f64(win.gradient_error_total);
    w.u64(win.gradient_error_total_steps);
    w.f64(state.loss_sum);
    w.u64(state.loss_count);
    match &state.iterates {
        None => w.u8(0),
        Some(it) => {
            w.u8(1);
            w.f64s(&it.x);
            w.f64s(&it.x_prev);
            w.f64s(&it.ema);
            w.u64(it.steps);
        }
    }
    match &state.correlated_noise {
        None => w.u8(0),
        Some(history) => {
            w.u8(1);
            w.u64(history.len() as u64);
            for v in history {
                w.f64s(v);
            }
        }
    }

    let body = w.bytes;
    let mut out = Vec::with_capacity(body.len() + 28);
    out.extend_from_slice(MAGIC);
    out.extend_from_slice(&FORMAT_VERSION.to_le_bytes());
    out.extend_from_slice(&Md5::digest(&body));
    out.extend_from_slice(&body);
    out
}

/// Read a checkpoint file's bytes back, refusing one written for another run or by another
/// build ([`CheckpointError::Foreign`]) and one that is not whole ([`CheckpointError::Damaged`]).
pub fn decode(
    bytes: &[u8],
    resolved_config: &str,
    seed: u64,
) -> Result<SeedState, CheckpointError> {
    let mut r = Reader::new(bytes);
    if r.take(MAGIC.len(), "header").ok() != Some(MAGIC.as_slice()) {
        return Err(CheckpointError::Damaged("not a dpx checkpoint".into()));
    }
    let format = r.u32("format version")?;
    if format != FORMAT_VERSION {
        return Err(CheckpointError::Foreign(format!(
            "checkpoint format version {format}, this dpx reads version {FORMAT_VERSION}"
        )));
    }
    let sum = r.take(16, "checksum")?;
    let body = r.take(r.remaining(), "body")?;
    if Md5::digest(body).as_slice() != sum {
        return Err(CheckpointError::Damaged(
            "checksum mismatch (the file was changed or cut short)".into(),
        ));
    }
    let mut r = Reader::new(body);
    let (version, commit) = (r.str("dpx version")?, r.str("commit")?);
    if (version, commit) != dpx_build() {
        let (v, c) = dpx_build();
        return Err(CheckpointError::Foreign(format!(
            "written by dpx {version} (commit {commit}), this is dpx {v} (commit {c})"
        )));
    }
    if r.bytes("fingerprint")? != fingerprint(resolved_config, seed) {
        return Err(CheckpointError::Foreign(format!(
            "written for another experiment or seed than seed {seed} of this config"
        )));
    }
    if r.u64("seed")? != seed {
        return Err(CheckpointError::Foreign(format!(
            "written for another seed than {seed}"
        )));
    }
    let step = r.u64("step")?;
    let seconds = r.f64("seconds")?;
    let params = r.f32s("parameters")?;
    let optimizer = OptimizerState {
        velocity: r.f64s("optimizer")?,
        steps: r.u64("optimizer")?,
        b_sq: r.f64("optimizer")?,
        second_moment: r.f64s("optimizer")?,
    };
    let clip = read_clip(&mut r)?;
    let shuffle = match r.u8("sampler")? {
        0 => None,
        1 => {
            let permutation = r
                .u64s("sampler permutation")?
                .into_iter()
                .map(|i| usize::try_from(i).map_err(|_| r.damaged("sampler permutation")))
                .collect::<Result<Vec<_>, _>>()?;
            let cursor = match r.opt_u64("sampler position")? {
                None => None,
                Some(c) => Some(usize::try_from(c).map_err(|_| r.damaged("sampler position"))?),
            };
            Some(ShuffleState {
                permutation,
                cursor,
                epoch: r.u64("sampler epoch")?,
            })
        }
        t => return Err(r.damaged(format!("sampler: unknown kind {t}")).into()),
    };
    let sampling_word_pos = r.u128("sampling stream")?;
    let augment_word_pos = r.u128("augmentation stream")?;
    let ema = match r.u8("ema")? {
        0 => None,
        1 => Some(r.f32s("ema")?),
        t => return Err(r.damaged(format!("ema: unknown tag {t}")).into()),
    };
    // Each kept model takes at least 24 bytes (its step, accuracy and length).
    let n_snapshots = r.len(24, "kept models")?;
    let mut snapshots = Vec::with_capacity(n_snapshots);
    for _ in 0..n_snapshots {
        snapshots.push(crate::train::seed::Snapshot {
            step: r.u64("kept models")?,
            test_accuracy: r.f64("kept models")?,
            params: r.f32s("kept models")?.into(),
        });
    }
    let noise = match r.u8("noise stream")? {
        0 => NoiseState::Seeded {
            word_pos: r.u128("noise stream")?,
        },
        1 => NoiseState::Secure,
        t => return Err(r.damaged(format!("noise stream: unknown kind {t}")).into()),
    };
    // Each run of events takes at least 9 bytes (an event tag and a count).
    let runs = r.len(9, "ledger")?;
    let mut ledger = EventLedger::new();
    for _ in 0..runs {
        let event = r.event()?;
        let count = r.u64("ledger count")?;
        ledger.record_many(event, count);
    }
    let n_rows = r.len(8, "metrics rows")?;
    let rows = (0..n_rows)
        .map(|_| r.metrics_row())
        .collect::<Result<Vec<_>, _>>()?;
    let last = match r.u8("window")? {
        0 => None,
        1 => Some((r.opt_f64("window")?, r.f64("window")?)),
        t => return Err(r.damaged(format!("window: unknown tag {t}")).into()),
    };
    let window = WindowState {
        last,
        private_sum: r.f64("window")?,
        private_steps: r.u64("window")?,
        clipped: r.u64("window")?,
        examples: r.u64("window")?,
        gradient_error_sum: r.f64("window")?,
        gradient_error_steps: r.u64("window")?,
        gradient_error_total: r.f64("window")?,
        gradient_error_total_steps: r.u64("window")?,
    };
    let loss_sum = r.f64("training loss")?;
    let loss_count = r.u64("training loss")?;
    let iterates = match r.u8("iterates")? {
        0 => None,
        1 => Some(Iterates {
            x: r.f64s("iterates")?,
            x_prev: r.f64s("iterates")?,
            ema: r.f64s("iterates")?,
            steps: r.u64("iterates")?,
        }),
        t => return Err(r.damaged(format!("iterates: unknown tag {t}")).into()),
    };
    let correlated_noise = match r.u8("correlated noise")? {
        0 => None,
        1 => {
            // Each vector takes at least 8 bytes (its length).
            let n = r.len(8, "correlated noise")?;
            Some(
                (0..n)
                    .map(|_| r.f64s("correlated noise"))
                    .collect::<Result<Vec<_>, _>>()?,
            )
        }
        t => {
            return Err(r
                .damaged(format!("correlated noise: unknown tag {t}"))
                .into());
        }
    };
    r.finish()?;
    Ok(SeedState {
        step,
        seconds,
        params,
        optimizer,
        clip,
        shuffle,
        sampling_word_pos,
        augment_word_pos,
        ema,
        snapshots,
        noise,
        ledger,
        rows,
        window,
        loss_sum,
        loss_count,
        iterates,
        correlated_noise,
    })
}

/// Check that `state` fits seed `seed` of `exp`: the shapes of every vector, the kind of each
/// state, the evaluation rows of the steps taken, and a ledger holding exactly one event per
/// step taken, equal to the plan's events for those steps (so a resumed seed never under-counts
/// what it released).
pub fn validate(exp: &Experiment, seed: u64, state: &SeedState) -> Result<(), CheckpointError> {
    let bad = |what: String| Err(CheckpointError::Damaged(what));
    let plan = &exp.plan;
    let p = exp.model.num_params();
    let total = exp
        .accelerated
        .as_ref()
        .map_or(plan.steps, |a| a.plan.steps);
    if !(1..total).contains(&state.step) {
        return bad(format!(
            "step {} is not within the run's {total} steps",
            state.step
        ));
    }
    if !(state.seconds.is_finite() && state.seconds >= 0.0) {
        return bad(format!("seconds {}", state.seconds));
    }
    check_ledger_and_rows(exp, seed, state)?;
    if let Some(acc) = &exp.accelerated {
        let d = acc.train.dim();
        let fits = state.iterates.as_ref().is_some_and(|it| {
            it.x.len() == d && it.x_prev.len() == d && it.ema.len() == d && it.steps == state.step
        });
        let empty = state.params.is_empty()
            && state.ema.is_none()
            && state.snapshots.is_empty()
            && state.augment_word_pos == 0
            && state.optimizer == OptimizerState::default()
            && state.clip == ClipState::Stateless
            && state.shuffle.is_none()
            && matches!(state.noise, NoiseState::Seeded { .. });
        if !(fits && empty) {
            return bad("not the state of an [accelerated] seed of this run".into());
        }
        return check_streams(state);
    }
    if state.iterates.is_some() {
        return bad("the state of an [accelerated] seed".into());
    }
    if state.params.len() != p {
        return bad(format!(
            "{} parameters where the model has {p}",
            state.params.len()
        ));
    }
    if state.ema.as_ref().map(Vec::len) != exp.spec.train.ema_decay.map(|_| p) {
        return bad("the parameters' moving average does not fit train.ema_decay".into());
    }
    // BandMF keeps min(step, b − 1) noise vectors of P values.
    let history_fits = match (&plan.bandmf, &state.correlated_noise) {
        (None, None) => true,
        (Some(m), Some(h)) => {
            h.len() as u64 == state.step.min(m.bands - 1) && h.iter().all(|v| v.len() == p)
        }
        _ => false,
    };
    if !history_fits {
        return bad(
            "the correlated noise state does not fit noise.mechanism and noise.bands".into(),
        );
    }
    let kept: Vec<u64> = match exp.spec.output.save_model_every_evals {
        None => Vec::new(),
        Some(k) => state
            .rows
            .iter()
            .skip(1)
            .enumerate()
            .filter(|(i, _)| (*i as u64 + 1).is_multiple_of(k))
            .map(|(_, r)| r.step)
            .collect(),
    };
    let steps: Vec<u64> = state.snapshots.iter().map(|s| s.step).collect();
    if steps != kept || state.snapshots.iter().any(|s| s.params.len() != p) {
        return bad(format!(
            "kept models at steps {steps:?}, expected {kept:?} (output.save_model_every_evals)"
        ));
    }
    if exp.spec.train.augmentation.is_none() && state.augment_word_pos != 0 {
        return bad("an augmentation stream in a run without views".into());
    }
    let fresh = plan.optimizer.init_state(p);
    let o = &state.optimizer;
    if o.velocity.len() != fresh.velocity.len()
        || o.second_moment.len() != fresh.second_moment.len()
        || o.steps != state.step
    {
        return bad("optimizer state of another shape or step".into());
    }
    let clip_fits = match (&state.clip, plan.clip.init_state(p)) {
        (ClipState::Stateless, ClipState::Stateless)
        | (ClipState::ClipNorm(_), ClipState::ClipNorm(_))
        | (ClipState::Dcsgd(_), ClipState::Dcsgd(_)) => true,
        (ClipState::AdaClip(s), ClipState::AdaClip(_)) => s.mean.len() == p && s.std.len() == p,
        _ => false,
    };
    if !clip_fits {
        return bad(format!(
            "clipping state does not fit the {} policy",
            plan.clip.name()
        ));
    }
    let n = exp.data.train.len();
    match (&state.shuffle, &plan.sampler) {
        (Some(s), crate::config::spec::Sampler::Shuffle { batch_size }) => {
            let mut sampler = crate::data::sampler::ShuffleSampler::new(n, *batch_size)
                .map_err(|e| CheckpointError::Damaged(e.to_string()))?;
            sampler
                .set_position(s.permutation.clone(), s.cursor, s.epoch)
                .map_err(|e| CheckpointError::Damaged(format!("sampler: {e}")))?;
        }
        (None, crate::config::spec::Sampler::Shuffle { .. }) | (Some(_), _) => {
            return bad("sampler state of another sampler".into());
        }
        (None, _) => {}
    }
    check_streams(state)
}

/// The stream positions lie within ChaCha12's 2^68 words.
fn check_streams(state: &SeedState) -> Result<(), CheckpointError> {
    let words = 1u128 << 68;
    let noise_fits = match state.noise {
        NoiseState::Seeded { word_pos } => word_pos < words,
        NoiseState::Secure => true,
    };
    if state.sampling_word_pos >= words || state.augment_word_pos >= words || !noise_fits {
        return Err(CheckpointError::Damaged(
            "a random stream position beyond the stream".into(),
        ));
    }
    Ok(())
}

/// One event per step taken in the ledger, and the rows of the evaluations up to the step.
fn check_ledger_and_rows(
    exp: &Experiment,
    seed: u64,
    state: &SeedState,
) -> Result<(), CheckpointError> {
    let bad = |what: String| Err(CheckpointError::Damaged(what));
    // Every step's events are the plan's (a test holds runs to it), so the ledger of the steps
    // taken must be exactly the plan's: a file whose ledger would under-count is refused.
    let planned = match &exp.accelerated {
        Some(a) => a.plan.planned_ledger(state.step),
        None => exp.plan.planned_ledger(state.step),
    };
    let count = |l: &EventLedger| l.runs().iter().fold(0u64, |a, (_, c)| a.saturating_add(*c));
    let (recorded, expected) = (count(&state.ledger), count(&planned));
    if recorded != expected {
        return bad(format!(
            "the privacy ledger records {recorded} events, the plan has {expected} by step {}",
            state.step
        ));
    }
    if state.ledger != planned {
        return bad("the privacy ledger is not the plan's events for the steps taken".into());
    }
    let evals: Vec<u64> = match &exp.accelerated {
        Some(a) => super::accelerated::eval_steps(exp, a.plan.steps),
        None => exp.plan.eval_steps(),
    }
    .into_iter()
    .take_while(|&s| s <= state.step)
    .collect();
    let steps: Vec<u64> = state.rows.iter().map(|r| r.step).collect();
    if steps != evals || state.rows.iter().any(|r| r.seed != seed) {
        return bad(format!(
            "metrics rows at steps {steps:?}, expected {evals:?} of seed {seed}"
        ));
    }
    Ok(())
}

/// Whether `sampler` is the shuffling sampler (the one sampler with a position to save).
pub(crate) fn shuffle_state(sampler: &Sampler) -> Option<ShuffleState> {
    match sampler {
        Sampler::Shuffle(s) => {
            let (permutation, cursor, epoch) = s.position();
            Some(ShuffleState {
                permutation: permutation.to_vec(),
                cursor,
                epoch,
            })
        }
        // The cyclic, fixed-order and balls-in-bins samplers' position is the step, saved anyway.
        Sampler::Poisson(_)
        | Sampler::CyclicPoisson(_)
        | Sampler::FixedOrder(_)
        | Sampler::BallsInBins(_)
        | Sampler::FixedSize(_) => None,
    }
}

#[cfg(test)]
mod tests;
