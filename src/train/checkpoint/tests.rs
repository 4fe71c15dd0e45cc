//! Checkpoint → restore → continue equals straight-through training, for every clipping policy's
//! state, the momentum and Adam optimizer states and every sampler; the resumed ledger equals the
//! uninterrupted one; foreign and damaged files are refused without panicking.

use std::path::Path;
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, Ordering};

use md5::{Digest, Md5};

use super::*;
use crate::train::prepare::Experiment;
use crate::train::{Observer, SeedEnd, SeedResult, Silent, train_seed, train_seed_checkpointed};

const SEED: u64 = 3;

fn experiment(clip: &str, train_extra: &str, privacy_extra: &str) -> (Experiment, String) {
    let text = format!(
        r#"
[experiment]
name = "ckpt"
seeds = [3]

[data]
dataset = "gaussian_mixture"

[data.synthetic]
n_train = 600
n_test = 200
n_features = 6
n_classes = 3
separation = 4.0
seed = 7

[model]
architecture = "mlp"
hidden = [8]

[train]
epochs = 2
eval_every_steps = 5
{train_extra}

[clip]
{clip}

[privacy]
epsilon = 4.0
delta = 1e-5
{privacy_extra}
"#
    );
    let spec = crate::config::load_str(&text, Path::new("ckpt.toml")).unwrap();
    let resolved = spec.to_resolved_toml();
    let exp = Experiment::build(spec, Path::new("data")).unwrap();
    (exp, resolved)
}

/// Keeps every checkpoint a seed writes, in order.
#[derive(Default)]
struct Memory(Mutex<Vec<Vec<u8>>>);

impl CheckpointSink for Memory {
    fn save(&self, _seed: u64, bytes: &[u8]) -> Result<(), String> {
        self.0.lock().unwrap().push(bytes.to_vec());
        Ok(())
    }
}

/// Sets `cancel` once `at` steps are done (the seed then checkpoints and stops).
struct StopAt<'a> {
    at: u64,
    cancel: &'a AtomicBool,
}

impl Observer for StopAt<'_> {
    fn on_step(&self, _seed: u64, steps_done: u64, _total: u64) {
        if steps_done == self.at {
            self.cancel.store(true, Ordering::SeqCst);
        }
    }
}

fn finished(end: SeedEnd) -> SeedResult {
    match end {
        SeedEnd::Finished(r) => *r,
        SeedEnd::Interrupted => panic!("interrupted"),
    }
}

fn without_seconds(mut r: SeedResult) -> SeedResult {
    r.summary.seconds = 0.0;
    r
}

/// Train straight through; then checkpoint every 3 steps, stop at step `stop`, and resume from
/// the interrupt's checkpoint and from the first periodic one. Returns the straight result and
/// the resumed ones.
fn straight_and_resumed(exp: &Experiment, resolved: &str, stop: u64) -> Vec<SeedResult> {
    let straight = finished(train_seed(exp, SEED, &Silent, &AtomicBool::new(false)).unwrap());
    let sink = Memory::default();
    let c = Checkpointing {
        every: Some(3),
        on_interrupt: true,
        resolved_config: resolved,
        sink: &sink,
    };
    let cancel = AtomicBool::new(false);
    let stop_at = StopAt {
        at: stop,
        cancel: &cancel,
    };
    let end = train_seed_checkpointed(exp, SEED, &stop_at, &cancel, Some(&c), None).unwrap();
    assert_eq!(end, SeedEnd::Interrupted);
    let files = sink.0.into_inner().unwrap();
    // Periodic checkpoints at 3, 6, ... below `stop`, then the interrupt's at `stop`.
    assert_eq!(files.len() as u64, (stop - 1) / 3 + 1);
    let mut out = vec![straight];
    for bytes in [files.last().unwrap(), &files[0]] {
        let state = decode(bytes, resolved, SEED).unwrap();
        validate(exp, SEED, &state).unwrap();
        let resumed = train_seed_checkpointed(
            exp,
            SEED,
            &Silent,
            &AtomicBool::new(false),
            None,
            Some(state),
        )
        .unwrap();
        out.push(finished(resumed));
    }
    out
}

/// Straight-through and resumed runs (see [`straight_and_resumed`]) agree but for `seconds`, and
/// the ledger is the plan's; returns the straight result.
fn assert_same_as_straight(name: &str, exp: &Experiment, resolved: &str) -> SeedResult {
    let results = straight_and_resumed(exp, resolved, 7);
    let straight = without_seconds(results[0].clone());
    for r in &results[1..] {
        let r = without_seconds(r.clone());
        assert_eq!(
            r.ledger, straight.ledger,
            "{name}: resumed ledger != straight"
        );
        assert_eq!(r.rows, straight.rows, "{name}: rows differ");
        assert_eq!(r.summary, straight.summary, "{name}: summary differs");
    }
    assert_eq!(
        straight.ledger,
        exp.plan.planned_ledger(exp.plan.steps),
        "{name}"
    );
    straight
}

fn assert_resumes_bit_for_bit(name: &str, clip: &str, train_extra: &str) {
    // Batches without replacement are accounted under replace-one neighbours.
    let privacy = if train_extra.contains("fixed_size") {
        "neighbouring = \"replace_one\""
    } else {
        ""
    };
    let (exp, resolved) = experiment(clip, train_extra, privacy);
    assert!(exp.plan.steps > 10, "{name}: {} steps", exp.plan.steps);
    assert_same_as_straight(name, &exp, &resolved);
}

#[test]
fn fixed_order_batches_with_bandmf_resume_bit_for_bit() {
    let (exp, resolved) = experiment(
        "clip_norm = 1.0",
        "sampler = \"fixed_order\"\nbatch_size = 50\nlearning_rate = 0.5",
        "neighbouring = \"replace_one\"\n[noise]\nmechanism = \"bandmf\"\nbands = 4",
    );
    let straight = assert_same_as_straight("fixed_order", &exp, &resolved);
    // 12 batches per epoch, 24 steps: two unsampled releases.
    let sigma = exp.plan.privacy.as_ref().unwrap().noise_multiplier;
    assert_eq!(
        straight.ledger.runs(),
        &[(crate::privacy::event::DpEvent::gaussian(sigma), 2)]
    );
}

#[test]
fn balls_in_bins_batches_resume_bit_for_bit() {
    // The epoch's assignment is rebuilt from the step alone: checkpoints inside an epoch must
    // continue its batches.
    let (exp, resolved) = experiment(
        "clip_norm = 1.0",
        "sampler = \"balls_in_bins\"\nbatch_size = 50\nlearning_rate = 0.5",
        "",
    );
    let straight = assert_same_as_straight("balls_in_bins", &exp, &resolved);
    // 12 batches per epoch: one random allocation per epoch of 12 steps.
    let sigma = exp.plan.privacy.as_ref().unwrap().noise_multiplier;
    let epochs = exp.plan.steps.div_ceil(12);
    assert_eq!(
        straight.ledger.runs(),
        &[(
            crate::privacy::event::DpEvent::random_allocation(
                12,
                crate::privacy::event::DpEvent::gaussian(sigma)
            ),
            epochs
        )]
    );
}

#[test]
fn bandmf_resumes_bit_for_bit_with_its_noise_history() {
    // 24 steps of 4 bands: checkpoints at steps 3 and 6 hold 3 noise vectors, the interrupt's at
    // step 7 too; the resumed runs must continue the same correlated noise.
    let (exp, resolved) = experiment(
        "clip_norm = 1.0",
        MOMENTUM,
        "[noise]\nmechanism = \"bandmf\"\nbands = 4",
    );
    assert_eq!(exp.plan.bandmf.as_ref().map(|m| m.bands), Some(4));
    let straight = assert_same_as_straight("bandmf", &exp, &resolved);
    // ⌈24 / 4⌉ = 6 rounds of the group rate's subsampled Gaussian.
    let sigma = exp.plan.privacy.as_ref().unwrap().noise_multiplier;
    let round = crate::privacy::event::DpEvent::poisson_sampled(
        4.0 * 50.0 / 600.0,
        crate::privacy::event::DpEvent::gaussian(sigma),
    );
    assert_eq!(straight.ledger.runs(), &[(round, 6)]);
    // A checkpoint whose noise history does not fit is damaged, not used.
    let bytes = first_checkpoint(&exp, &resolved, 3, 4);
    let mut state = decode(&bytes, &resolved, SEED).unwrap();
    assert_eq!(state.correlated_noise.as_ref().map(Vec::len), Some(3));
    state.correlated_noise.as_mut().unwrap().pop();
    assert!(matches!(
        validate(&exp, SEED, &state),
        Err(CheckpointError::Damaged(_))
    ));
}

const SGD: &str = "expected_batch_size = 50\nlearning_rate = 0.5";
const MOMENTUM: &str =
    "expected_batch_size = 50\nlearning_rate = 0.2\noptimizer = \"momentum\"\nmomentum = 0.5";
const ADAM: &str = "expected_batch_size = 50\nlearning_rate = 0.02\noptimizer = \"adam\"";

#[test]
fn every_clip_policy_resumes_bit_for_bit() {
    for (name, clip, extra) in [
        ("flat", "clip_norm = 1.0", SGD),
        (
            "per_layer",
            "policy = \"per_layer\"\nclip_norm = 1.0\n[clip.per_layer]\nsplit = \"by_size\"",
            SGD,
        ),
        (
            "decay",
            "policy = \"decay\"\nclip_norm = 2.0\n[clip.decay]\nfinal_ratio = 0.25",
            SGD,
        ),
        (
            "automatic",
            "policy = \"automatic\"\n[clip.automatic]\ngamma = 0.01",
            SGD,
        ),
        (
            "quantile",
            "policy = \"quantile\"\nclip_norm = 0.1\n[clip.quantile]\ntarget_quantile = 0.5\nlearning_rate = 0.2",
            SGD,
        ),
        (
            "adaclip",
            "policy = \"adaclip\"\n[clip.adaclip]\nh2 = 0.01\ninitial_std = \"sqrt_h2\"",
            MOMENTUM,
        ),
        (
            "dcsgd_p",
            "policy = \"dcsgd_p\"\n[clip.dcsgd_p]\npercentile = 0.7",
            SGD,
        ),
        ("dcsgd_e", "policy = \"dcsgd_e\"", ADAM),
    ] {
        assert_resumes_bit_for_bit(name, clip, extra);
    }
}

#[test]
fn momentum_adam_and_every_sampler_resume_bit_for_bit() {
    for (name, extra) in [
        ("momentum", MOMENTUM),
        ("adam", ADAM),
        (
            "bias_corrected_momentum",
            "expected_batch_size = 50\nlearning_rate = 0.2\noptimizer = \"bias_corrected_momentum\"\nmomentum = 0.9",
        ),
        (
            "shuffle",
            "sampler = \"shuffle\"\nbatch_size = 50\nlearning_rate = 0.2\noptimizer = \"momentum\"",
        ),
        (
            "fixed_size",
            "sampler = \"fixed_size\"\nbatch_size = 50\nlearning_rate = 0.02\noptimizer = \"adam\"",
        ),
    ] {
        assert_resumes_bit_for_bit(name, "clip_norm = 1.0", extra);
    }
}

#[test]
fn the_state_changes_from_step_to_step_so_the_comparison_can_fail() {
    // A resumed seed whose optimizer state were not restored would differ: check that momentum,
    // Adam and the quantile C_t really evolve (so the tests above compare something).
    for (clip, extra) in [
        ("clip_norm = 1.0", MOMENTUM),
        ("clip_norm = 1.0", ADAM),
        (
            "policy = \"quantile\"\nclip_norm = 0.1\n[clip.quantile]\ntarget_quantile = 0.5\nlearning_rate = 0.2",
            SGD,
        ),
    ] {
        let (exp, resolved) = experiment(clip, extra, "");
        let sink = Memory::default();
        let c = Checkpointing {
            every: Some(3),
            on_interrupt: false,
            resolved_config: &resolved,
            sink: &sink,
        };
        let cancel = AtomicBool::new(false);
        train_seed_checkpointed(&exp, SEED, &Silent, &cancel, Some(&c), None).unwrap();
        let files = sink.0.into_inner().unwrap();
        let a = decode(&files[0], &resolved, SEED).unwrap();
        let b = decode(&files[1], &resolved, SEED).unwrap();
        assert!(a.optimizer.velocity != b.optimizer.velocity || a.clip != b.clip);
        assert_ne!(a.params, b.params);
        assert_ne!(a.sampling_word_pos, b.sampling_word_pos);
        assert_ne!(a.noise, b.noise);
    }
}

#[test]
fn secure_noise_resumes_with_a_complete_ledger() {
    let (exp, resolved) = experiment("clip_norm = 1.0", MOMENTUM, "secure_noise = true");
    let results = straight_and_resumed(&exp, &resolved, 8);
    let straight = &results[0];
    for r in &results[1..] {
        assert_eq!(r.ledger, straight.ledger);
        assert_eq!(r.ledger, exp.plan.planned_ledger(exp.plan.steps));
        assert_eq!(r.summary.epsilon, straight.summary.epsilon);
        assert_eq!(r.summary.noise_mode, "secure");
        let steps = |x: &SeedResult| {
            x.rows
                .iter()
                .map(|r| (r.step, r.epsilon))
                .collect::<Vec<_>>()
        };
        assert_eq!(steps(r), steps(straight));
    }
}

/// The bytes of the first periodic checkpoint (every `every` steps) of a seed stopped at `stop`.
fn first_checkpoint(exp: &Experiment, resolved: &str, every: u64, stop: u64) -> Vec<u8> {
    let sink = Memory::default();
    let c = Checkpointing {
        every: Some(every),
        on_interrupt: false,
        resolved_config: resolved,
        sink: &sink,
    };
    let cancel = AtomicBool::new(false);
    let stop = StopAt {
        at: stop,
        cancel: &cancel,
    };
    train_seed_checkpointed(exp, SEED, &stop, &cancel, Some(&c), None).unwrap();
    sink.0.into_inner().unwrap().remove(0)
}

/// A real checkpoint's bytes (flat clipping, momentum, at step 4).
fn sample_file() -> (Experiment, String, Vec<u8>) {
    let (exp, resolved) = experiment("clip_norm = 1.0", MOMENTUM, "");
    let bytes = first_checkpoint(&exp, &resolved, 4, 5);
    (exp, resolved, bytes)
}

/// `bytes` with its body replaced by `edit(body)` and the checksum recomputed.
fn with_body(bytes: &[u8], edit: impl FnOnce(&mut Vec<u8>)) -> Vec<u8> {
    let mut body = bytes[28..].to_vec();
    edit(&mut body);
    let mut out = bytes[..12].to_vec();
    out.extend_from_slice(&Md5::digest(&body));
    out.extend_from_slice(&body);
    out
}

#[test]
fn another_config_seed_version_or_format_is_refused() {
    let (_, resolved, bytes) = sample_file();
    assert!(decode(&bytes, &resolved, SEED).is_ok());
    let foreign = |r: Result<SeedState, CheckpointError>| match r {
        Err(CheckpointError::Foreign(m)) => m,
        other => panic!("expected a refusal, got {other:?}"),
    };
    let other_config = resolved.replace("learning_rate = 0.2", "learning_rate = 0.3");
    assert_ne!(other_config, resolved);
    assert!(foreign(decode(&bytes, &other_config, SEED)).contains("another experiment"));
    assert!(foreign(decode(&bytes, &resolved, SEED + 1)).contains("seed"));
    // The version string is the body's first field (a length, then the text).
    let (version, _) = dpx_build();
    let other_version = with_body(&bytes, |b| {
        let at = 8 + version.len();
        assert_eq!(&b[8..at], version.as_bytes());
        b[8] = if b[8] == b'9' { b'8' } else { b'9' };
    });
    assert!(foreign(decode(&other_version, &resolved, SEED)).contains("written by dpx"));
    let mut other_format = bytes.clone();
    other_format[8] = 99;
    assert!(foreign(decode(&other_format, &resolved, SEED)).contains("format version 99"));
}

#[test]
fn damaged_files_are_refused_never_a_panic() {
    let (exp, resolved, bytes) = sample_file();
    let damaged = |b: &[u8]| {
        assert!(
            matches!(decode(b, &resolved, SEED), Err(CheckpointError::Damaged(_))),
            "accepted a damaged file"
        );
    };
    for len in 0..bytes.len() {
        damaged(&bytes[..len]);
    }
    for i in (0..bytes.len()).step_by(7) {
        if (8..12).contains(&i) {
            continue; // the format version: a refusal of its own
        }
        let mut b = bytes.clone();
        b[i] ^= 0x10;
        damaged(&b);
    }
    damaged(&[bytes.as_slice(), b"x"].concat());
    // A huge parameter count behind a valid checksum: refused before allocating.
    let (version, commit) = dpx_build();
    let params_at = 8 + version.len() + 8 + commit.len() + 8 + 16 + 8 + 8 + 8;
    let huge = with_body(&bytes, |b| {
        b[params_at..params_at + 8].copy_from_slice(&(u64::MAX / 4).to_le_bytes())
    });
    damaged(&huge);
    // A well-formed file whose contents do not fit the run: refused by `validate`.
    let mut state = decode(&bytes, &resolved, SEED).unwrap();
    validate(&exp, SEED, &state).unwrap();
    state
        .ledger
        .record(crate::privacy::event::DpEvent::NonPrivate);
    assert!(matches!(
        validate(&exp, SEED, &state),
        Err(CheckpointError::Damaged(m)) if m.contains("ledger")
    ));
    // A ledger with the right count but a weaker event (a larger σ) would under-count ε.
    let mut state = decode(&bytes, &resolved, SEED).unwrap();
    let (event, count) = state.ledger.runs()[0].clone();
    let weaker = match event {
        crate::privacy::event::DpEvent::PoissonSampled { sample_rate, .. } => {
            crate::privacy::event::DpEvent::poisson_sampled(
                sample_rate,
                crate::privacy::event::DpEvent::gaussian(100.0),
            )
        }
        other => panic!("unexpected step event {other:?}"),
    };
    state.ledger = EventLedger::new();
    state.ledger.record_many(weaker, count);
    assert!(matches!(
        validate(&exp, SEED, &state),
        Err(CheckpointError::Damaged(m)) if m.contains("plan")
    ));
    let mut state = decode(&bytes, &resolved, SEED).unwrap();
    state.params.pop();
    assert!(validate(&exp, SEED, &state).is_err());
}

fn accelerated_experiment(dir: &Path, accelerated: &str, batch: usize) -> (Experiment, String) {
    let text = format!(
        r#"
[experiment]
name = "acc"
seeds = [3]
[data]
dataset = "logistic_synthetic"
[data.synthetic]
n_train = 600
n_test = 200
n_features = 8
seed = 1
[model]
architecture = "logistic"
l2 = 0.02
[train]
steps = 40
sampler = "fixed_size"
batch_size = {batch}
eval_every_steps = 5
[accelerated]
{accelerated}
"#
    );
    let spec = crate::config::load_str(&text, Path::new("acc.toml")).unwrap();
    let resolved = spec.to_resolved_toml();
    (Experiment::build(spec, dir).unwrap(), resolved)
}

#[test]
fn accelerated_methods_resume_bit_for_bit() {
    let dir = tempfile::tempdir().unwrap();
    for (accelerated, batch) in [
        ("method = \"gd\"\nepsilon = 2.0", 100),
        ("method = \"heavy_ball_ema\"\nepsilon = 1.0", 600),
        (
            "method = \"nesterov\"\nepsilon = 1.0\nnoise_dividing = true\nselect_steps = false",
            100,
        ),
        (
            "method = \"masg\"\nepsilon = 1.0\nnoise_dividing = true\nselect_steps = false",
            100,
        ),
    ] {
        let (exp, resolved) = accelerated_experiment(dir.path(), accelerated, batch);
        let total = exp.accelerated.as_ref().unwrap().plan.steps;
        assert!(total > 10, "{accelerated}: {total} steps");
        let results = straight_and_resumed(&exp, &resolved, 7);
        let straight = without_seconds(results[0].clone());
        for r in &results[1..] {
            let r = without_seconds(r.clone());
            assert_eq!(r.ledger, straight.ledger, "{accelerated}");
            assert_eq!(r.rows, straight.rows, "{accelerated}");
            assert_eq!(r.summary, straight.summary, "{accelerated}");
        }
    }
}

#[test]
fn a_dp_sgd_checkpoint_does_not_fit_an_accelerated_run() {
    let dir = tempfile::tempdir().unwrap();
    let (exp, _) = accelerated_experiment(dir.path(), "method = \"gd\"\nepsilon = 2.0", 100);
    let (_, resolved, bytes) = sample_file();
    let state = decode(&bytes, &resolved, SEED).unwrap();
    assert!(matches!(
        validate(&exp, SEED, &state),
        Err(CheckpointError::Damaged(_))
    ));
}
