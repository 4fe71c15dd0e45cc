//! `data.standardize = "private"` (Tramèr & Boneh 2021, Algorithm 2): the statistics are two
//! Gaussian releases at the head of every seed's ledger, calibration covers them, the standardised
//! data follow from the release alone, and the config refuses what it cannot account.

use std::path::{Path, PathBuf};
use std::sync::atomic::AtomicBool;

use dpx::config;
use dpx::privacy::event::DpEvent;
use dpx::train::prepare::{Experiment, prepare_data};
use dpx::train::{SeedEnd, Silent, train_seed};

#[path = "support/mnist.rs"]
mod mnist;

fn mixture_config(dir: &Path, data_extra: &str, extra: &str) -> PathBuf {
    let text = format!(
        r#"
[experiment]
name = "private_statistics"
seeds = [0, 1]

[data]
dataset = "gaussian_mixture"
{data_extra}

[data.synthetic]
n_train = 2000
n_test = 400
n_features = 8
n_classes = 3
separation = 4.0
seed = 3

[model]
architecture = "logistic"

[train]
epochs = 2
expected_batch_size = 100
learning_rate = 0.5
eval_every_steps = 10

[clip]
clip_norm = 1.0

{extra}
"#
    );
    let path = dir.join(format!("cfg{}.toml", data_extra.len() + extra.len()));
    std::fs::write(&path, text).unwrap();
    path
}

const PRIVATE_STATS: &str = "standardize = \"private\"\nstandardize_noise_multiplier = 8.0\nstandardize_mean_clip_norm = 10.0\nstandardize_second_moment_clip_norm = 50.0";
const BUDGET: &str = "[privacy]\nepsilon = 2.0\ndelta = 1e-5\n";

#[test]
fn the_statistics_are_two_events_at_the_head_of_every_ledger_and_calibration_covers_them() {
    let dir = tempfile::tempdir().unwrap();
    let exp = Experiment::build(
        config::load(&mixture_config(dir.path(), PRIVATE_STATS, BUDGET)).unwrap(),
        dir.path(),
    )
    .unwrap();
    let plain = Experiment::build(
        config::load(&mixture_config(dir.path(), "", BUDGET)).unwrap(),
        dir.path(),
    )
    .unwrap();
    let initial = exp.plan.initial_ledger();
    assert_eq!(initial.runs(), &[(DpEvent::gaussian(8.0), 2)]);
    assert!(plain.plan.initial_ledger().runs().is_empty());

    // Calibration spends part of the budget on the statistics: more noise on the gradients.
    let sigma = exp.plan.privacy.as_ref().unwrap().noise_multiplier;
    let sigma_plain = plain.plan.privacy.as_ref().unwrap().noise_multiplier;
    assert!(sigma > sigma_plain, "{sigma} <= {sigma_plain}");
    let stats_eps = exp.plan.epsilon_of(&initial).unwrap().unwrap().epsilon;
    assert!(stats_eps > 0.0 && stats_eps < 2.0, "{stats_eps}");

    // The recorded ledger is the planned one, statistics first; ε of the whole run is the
    // target's, and the row of step 0 already carries the statistics' ε.
    let planned = exp.plan.planned_ledger(exp.plan.steps);
    assert_eq!(planned.runs()[0], (DpEvent::gaussian(8.0), 2));
    match train_seed(&exp, 0, &Silent, &AtomicBool::new(false)).unwrap() {
        SeedEnd::Finished(res) => {
            assert_eq!(res.ledger, planned);
            let eps = res.rows.last().unwrap().epsilon.unwrap();
            assert!(eps <= 2.0 && eps > 1.99, "{eps}");
            assert_eq!(res.rows[0].step, 0);
            assert_eq!(res.rows[0].epsilon, Some(stats_eps));
        }
        SeedEnd::Interrupted => panic!("not interrupted"),
    }
}

#[test]
fn a_fixed_noise_multiplier_run_reports_the_statistics_in_its_epsilon() {
    let dir = tempfile::tempdir().unwrap();
    let fixed = "[noise]\nnoise_multiplier = 1.0\n[privacy]\ndelta = 1e-5\n";
    let with = Experiment::build(
        config::load(&mixture_config(dir.path(), PRIVATE_STATS, fixed)).unwrap(),
        dir.path(),
    )
    .unwrap();
    let without = Experiment::build(
        config::load(&mixture_config(dir.path(), "", fixed)).unwrap(),
        dir.path(),
    )
    .unwrap();
    let eps = |e: &Experiment| {
        e.plan
            .epsilon_of(&e.plan.planned_ledger(e.plan.steps))
            .unwrap()
            .unwrap()
            .epsilon
    };
    assert!(eps(&with) > eps(&without));
}

#[test]
fn with_little_noise_and_loose_clips_it_is_the_training_set_standardisation() {
    let dir = tempfile::tempdir().unwrap();
    let tiny_noise = "standardize = \"private\"\nstandardize_noise_multiplier = 1e-9\nstandardize_mean_clip_norm = 1e6\nstandardize_second_moment_clip_norm = 1e6";
    let private = prepare_data(
        &config::load(&mixture_config(dir.path(), tiny_noise, BUDGET)).unwrap(),
        dir.path(),
    )
    .unwrap();
    let leaky = prepare_data(
        &config::load(&mixture_config(
            dir.path(),
            "standardize = \"per_feature\"\nallow_nonprivate_statistics = true",
            BUDGET,
        ))
        .unwrap(),
        dir.path(),
    )
    .unwrap();
    let gap = private
        .train
        .features
        .iter()
        .zip(leaky.train.features.iter())
        .map(|(a, b)| (a - b).abs())
        .fold(0.0f32, f32::max);
    // Only the 1e-5 added to the variance (and float rounding) differ.
    assert!(gap < 1e-3, "{gap}");
    assert!(
        private
            .notes
            .iter()
            .any(|n| n.contains("private standardisation"))
    );
}

#[test]
fn the_release_is_the_experiments_whatever_its_seeds_and_follows_its_own_seed() {
    let dir = tempfile::tempdir().unwrap();
    let spec = config::load(&mixture_config(dir.path(), PRIVATE_STATS, BUDGET)).unwrap();
    let a = prepare_data(&spec, dir.path()).unwrap();
    let b = prepare_data(&spec, dir.path()).unwrap();
    assert_eq!(a.train.features, b.train.features);
    assert_eq!(a.test.features, b.test.features);
    // The seeds of an experiment split into several runs see the same release.
    let mut other_seeds = spec.clone();
    other_seeds.seeds = vec![5, 0];
    let c = prepare_data(&other_seeds, dir.path()).unwrap();
    assert_eq!(a.train.features, c.train.features);
    // data.standardize_seed draws another release.
    let reseeded = config::load(&mixture_config(
        dir.path(),
        &format!("{PRIVATE_STATS}\nstandardize_seed = 1"),
        BUDGET,
    ))
    .unwrap();
    let d = prepare_data(&reseeded, dir.path()).unwrap();
    assert_ne!(a.train.features, d.train.features);
    assert!(reseeded.to_resolved_toml().contains("standardize_seed = 1"));
}

#[test]
fn images_are_standardised_per_channel() {
    let dir = tempfile::tempdir().unwrap();
    let mnist = dir.path().join("mnist");
    std::fs::create_dir_all(&mnist).unwrap();
    mnist::tiny_mnist(&mnist, 40, 7919);
    let text = |standardize: &str| {
        format!(
            "[experiment]\nname = \"m\"\n[data]\ndataset = \"mnist\"\n{standardize}\n[model]\narchitecture = \"logistic\"\n[train]\nsteps = 2\nexpected_batch_size = 10\nlearning_rate = 0.1\n[clip]\nclip_norm = 1.0\n[noise]\nnoise_multiplier = 1.0\n[privacy]\ndelta = 1e-5\n"
        )
    };
    let load = |s: &str| {
        let path = dir.path().join("m.toml");
        std::fs::write(&path, text(s)).unwrap();
        prepare_data(&config::load(&path).unwrap(), dir.path()).unwrap()
    };
    let private = load(
        "standardize = \"private\"\nstandardize_noise_multiplier = 1e-9\nstandardize_mean_clip_norm = 1e3\nstandardize_second_moment_clip_norm = 1e3",
    );
    let leaky = load("standardize = \"per_channel\"\nallow_nonprivate_statistics = true");
    let gap = private
        .train
        .features
        .iter()
        .zip(leaky.train.features.iter())
        .map(|(a, b)| (a - b).abs())
        .fold(0.0f32, f32::max);
    assert!(gap < 1e-3, "{gap}");
    assert!(private.notes.iter().any(|n| n.contains("1 channels")));
    // A variance floor changes only the channels whose released variance is below it: here the
    // noise is negligible, so a floor far below every channel's variance changes nothing, and
    // one above it rescales the channel (and is named in the note), keeping it centred.
    let tiny_floor = load(
        "standardize = \"private\"\nstandardize_noise_multiplier = 1e-9\nstandardize_mean_clip_norm = 1e3\nstandardize_second_moment_clip_norm = 1e3\nstandardize_variance_floor = 1e-12",
    );
    assert_eq!(tiny_floor.train.features, private.train.features);
    let big_floor = load(
        "standardize = \"private\"\nstandardize_noise_multiplier = 1e-9\nstandardize_mean_clip_norm = 1e3\nstandardize_second_moment_clip_norm = 1e3\nstandardize_variance_floor = 100.0",
    );
    assert!(
        big_floor.notes.iter().any(|n| n.contains("raised to it")),
        "{:?}",
        big_floor.notes
    );
    let (a, b) = (&big_floor.train.features, &private.train.features);
    let ratio = a[[0, 0]] / b[[0, 0]];
    assert!(ratio > 0.0 && ratio < 1.0, "{ratio}");
    for (x, y) in a.iter().zip(b.iter()) {
        assert!(
            (x - ratio * y).abs() < 1e-4 * (1.0 + y.abs()),
            "{x} vs {ratio}·{y}"
        );
    }
}

fn refused(dir: &Path, data_extra: &str, extra: &str) -> String {
    match config::load(&mixture_config(dir, data_extra, extra)) {
        Ok(_) => panic!("accepted: {data_extra} / {extra}"),
        Err(e) => e.to_string(),
    }
}

#[test]
fn what_cannot_be_accounted_is_refused_naming_the_key() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let e = refused(
        d,
        "standardize = \"private\"\nstandardize_mean_clip_norm = 1.0\nstandardize_second_moment_clip_norm = 1.0",
        BUDGET,
    );
    assert!(e.contains("data.standardize_noise_multiplier"), "{e}");
    let e = refused(
        d,
        &PRIVATE_STATS.replace(
            "standardize_mean_clip_norm = 10.0",
            "standardize_mean_clip_norm = -1",
        ),
        BUDGET,
    );
    assert!(e.contains("data.standardize_mean_clip_norm"), "{e}");
    let e = refused(d, "standardize_noise_multiplier = 8.0", BUDGET);
    assert!(e.contains("data.standardize_noise_multiplier"), "{e}");
    let e = refused(d, "standardize_seed = 3", BUDGET);
    assert!(e.contains("data.standardize_seed"), "{e}");
    let e = refused(d, "standardize_variance_floor = 1e-4", BUDGET);
    assert!(e.contains("data.standardize_variance_floor"), "{e}");
    let e = refused(
        d,
        &format!("{PRIVATE_STATS}\nstandardize_variance_floor = -1e-4"),
        BUDGET,
    );
    assert!(e.contains("data.standardize_variance_floor"), "{e}");
    let e = refused(d, PRIVATE_STATS, "[privacy]\nenabled = false\n");
    assert!(e.contains("data.standardize"), "{e}");
    let e = refused(
        d,
        PRIVATE_STATS,
        "[privacy]\nepsilon = 2.0\ndelta = 1e-5\nsecure_noise = true\n",
    );
    assert!(e.contains("privacy.secure_noise"), "{e}");
}
