//! `data.standardize = "private"` (Tramèr & Boneh 2021, Algorithm 2): the statistics are two
//! Gaussian releases at the head of every seed's ledger, calibration covers them, the standardised
//! data follow from the release alone, and the config refuses what it cannot account.

use std::path::{Path, PathBuf};

use dpx::config;
use dpx::privacy::event::DpEvent;
use dpx::train::prepare::prepare_data;

#[path = "support/head_releases.rs"]
mod head_releases;
#[path = "support/mnist.rs"]
mod mnist;

use head_releases::{assert_head_releases_are_calibrated, build, planned_epsilon};

fn mixture_config(dir: &Path, data_extra: &str, extra: &str) -> PathBuf {
    head_releases::mixture_config(dir, 8, "architecture = \"logistic\"", data_extra, extra)
}

const PRIVATE_STATS: &str = "standardize = \"private\"\nstandardize_noise_multiplier = 8.0\nstandardize_mean_clip_norm = 10.0\nstandardize_second_moment_clip_norm = 50.0";
const BUDGET: &str = "[privacy]\nepsilon = 2.0\ndelta = 1e-5\n";

#[test]
fn the_statistics_are_two_events_at_the_head_of_every_ledger_and_calibration_covers_them() {
    let dir = tempfile::tempdir().unwrap();
    let exp = build(
        dir.path(),
        &mixture_config(dir.path(), PRIVATE_STATS, BUDGET),
    );
    let plain = build(dir.path(), &mixture_config(dir.path(), "", BUDGET));
    assert_head_releases_are_calibrated(&exp, &plain, &[(DpEvent::gaussian(8.0), 2)], 2.0);
}

#[test]
fn a_fixed_noise_multiplier_run_reports_the_statistics_in_its_epsilon() {
    let dir = tempfile::tempdir().unwrap();
    let fixed = "[noise]\nnoise_multiplier = 1.0\n[privacy]\ndelta = 1e-5\n";
    let with = build(
        dir.path(),
        &mixture_config(dir.path(), PRIVATE_STATS, fixed),
    );
    let without = build(dir.path(), &mixture_config(dir.path(), "", fixed));
    assert!(planned_epsilon(&with) > planned_epsilon(&without));
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
