//! `data.features = "scattering"`: its config keys (checks, resolved output), the data
//! preparation (shapes after the transform) and the on-disk feature cache (reuse, damage).

use std::path::{Path, PathBuf};

use dpx::config;
use dpx::train::prepare::{Experiment, prepare_data};

#[path = "support/mnist.rs"]
mod mnist;

fn config_text(dataset: &str, data_extra: &str) -> String {
    format!(
        r#"[experiment]
name = "scatter"
[data]
dataset = "{dataset}"
{data_extra}
[model]
architecture = "logistic"
[train]
steps = 2
expected_batch_size = 10
learning_rate = 0.1
[clip]
clip_norm = 1.0
[noise]
noise_multiplier = 1.0
[privacy]
delta = 1e-5
"#
    )
}

fn error_of(text: &str) -> String {
    config::load_str(text, Path::new("x.toml"))
        .expect_err("refused")
        .to_string()
}

#[test]
fn config_checks_name_the_key() {
    let e = error_of(&config_text(
        "gaussian_mixture",
        "features = \"scattering\"",
    ));
    assert!(
        e.contains("data.features") && e.contains("image"),
        "non-image data: {e}"
    );
    let e = error_of(&config_text("mnist", "scattering_j = 2"));
    assert!(e.contains("data.scattering_j"), "pixels: {e}");
    let e = error_of(&config_text("mnist", "scattering_angles = 8"));
    assert!(e.contains("data.scattering_angles"), "pixels: {e}");
    let e = error_of(&config_text(
        "mnist",
        "features = \"scattering\"\nscattering_j = 9",
    ));
    assert!(e.contains("data.scattering_j"), "range: {e}");
    let e = error_of(&config_text(
        "mnist",
        "features = \"scattering\"\nscattering_angles = 0",
    ));
    assert!(e.contains("data.scattering_angles"), "range: {e}");
    let e = error_of(&config_text(
        "mnist",
        "features = \"scattering\"\npca_components = 10\nallow_nonprivate_statistics = true",
    ));
    assert!(e.contains("data.pca_components"), "with PCA: {e}");
    let e = error_of(&config_text("mnist", "features = \"wavelets\""));
    assert!(e.contains("features"), "unknown value: {e}");
}

#[test]
fn resolved_config_writes_only_non_defaults() {
    let resolved = |extra: &str| {
        config::load_str(&config_text("mnist", extra), Path::new("x.toml"))
            .expect("valid")
            .to_resolved_toml()
    };
    let pixels = resolved("");
    assert!(!pixels.contains("features") && !pixels.contains("scattering"));
    let default = resolved("features = \"scattering\"");
    assert!(default.contains("features = \"scattering\""), "{default}");
    assert!(!default.contains("scattering_j") && !default.contains("scattering_angles"));
    let custom = resolved("features = \"scattering\"\nscattering_j = 1\nscattering_angles = 4");
    assert!(
        custom.contains("scattering_j = 1") && custom.contains("scattering_angles = 4"),
        "{custom}"
    );
    // The resolved text reads back to the same spec.
    let again = config::load_str(&custom, Path::new("x.toml"))
        .expect("valid")
        .to_resolved_toml();
    assert_eq!(again, custom);
}

/// A valid spec with scattering features on the MNIST files in `mnist`, plus `extra` data keys.
fn scattering_spec(mnist: &Path, file: &Path, extra: &str) -> config::ExperimentSpec {
    config::load_str(
        &config_text(
            "mnist",
            &format!("path = {:?}\nfeatures = \"scattering\"\n{extra}", mnist),
        ),
        file,
    )
    .expect("valid")
}

/// A temporary directory holding `n` MNIST-format images in `mnist/`, with the data directory and
/// config path a test uses beside them: (the directory, kept alive; mnist; data dir; config file).
fn mnist_workspace(n: u32) -> (tempfile::TempDir, PathBuf, PathBuf, PathBuf) {
    let dir = tempfile::tempdir().expect("tempdir");
    let mnist = dir.path().join("mnist");
    std::fs::create_dir(&mnist).expect("mkdir");
    mnist::tiny_mnist(&mnist, n, 7919);
    let (data_dir, file) = (dir.path().join("data"), dir.path().join("x.toml"));
    (dir, mnist, data_dir, file)
}

#[test]
fn prepared_data_and_cache() {
    let (_dir, mnist, data_dir, file) = mnist_workspace(20);
    let spec = |extra: &str| scattering_spec(&mnist, &file, extra);
    let s = spec("validation_fraction = 0.25");
    let first = prepare_data(&s, &data_dir).expect("prepared");
    assert_eq!(first.train.sample_shape, vec![81, 7, 7]);
    assert_eq!(first.train.num_features(), 81 * 49);
    assert_eq!(first.train.len(), 15);
    let val = first.validation.as_ref().expect("validation split");
    assert_eq!(val.sample_shape, vec![81, 7, 7]);
    assert_eq!(first.test.sample_shape, vec![81, 7, 7]);
    // Scaled pixels in [0, 1]: the order-0 channel (a weighted average) is in [0, 1] too.
    let row = first.train.features.row(0);
    assert!(
        row.iter()
            .take(49)
            .all(|v| (-1e-3..=1.0 + 1e-3).contains(v))
    );

    let cache = data_dir.join("cache").join("scattering");
    let mut files: Vec<_> = std::fs::read_dir(&cache)
        .expect("cache dir")
        .map(|e| e.expect("entry").path())
        .collect();
    files.sort();
    assert_eq!(files.len(), 3, "train, validation and test: {files:?}");

    // Reuse: the same features, and the files untouched.
    let stamps: Vec<_> = files
        .iter()
        .map(|f| {
            std::fs::metadata(f)
                .expect("meta")
                .modified()
                .expect("mtime")
        })
        .collect();
    let second = prepare_data(&s, &data_dir).expect("prepared");
    assert_eq!(second.train, first.train);
    assert_eq!(second.test, first.test);
    for (f, t) in files.iter().zip(&stamps) {
        assert_eq!(
            &std::fs::metadata(f)
                .expect("meta")
                .modified()
                .expect("mtime"),
            t
        );
    }

    // Damage: a flipped payload byte in each file, and one truncated file. Never trusted:
    // recomputed, same features, the file rewritten whole.
    for f in &files {
        let mut bytes = std::fs::read(f).expect("read");
        let last = bytes.len() - 1;
        bytes[last] ^= 0x40;
        std::fs::write(f, &bytes).expect("write");
    }
    let third = prepare_data(&s, &data_dir).expect("prepared");
    assert_eq!(third.train, first.train);
    assert_eq!(third.test, first.test);
    assert_eq!(third.validation, first.validation);
    let len = std::fs::metadata(&files[0]).expect("meta").len();
    std::fs::write(&files[0], b"DPXSCAT1 short").expect("write");
    let fourth = prepare_data(&s, &data_dir).expect("prepared");
    assert_eq!(fourth.train, first.train);
    assert_eq!(fourth.test, first.test);
    assert_eq!(std::fs::metadata(&files[0]).expect("meta").len(), len);

    // Other parameters or other examples: other cache files.
    let other = prepare_data(&spec("scattering_j = 1\nscattering_angles = 4"), &data_dir)
        .expect("prepared");
    assert_eq!(other.train.sample_shape, vec![5, 14, 14]);
    let count = std::fs::read_dir(&cache).expect("cache dir").count();
    assert_eq!(count, 5, "train and test of the other parameters");
}

#[test]
fn image_sides_not_multiple_of_2_to_j_are_a_one_line_error() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mnist = dir.path().join("mnist");
    std::fs::create_dir(&mnist).expect("mkdir");
    mnist::tiny_mnist(&mnist, 4, 7919);
    let s = config::load_str(
        &config_text(
            "mnist",
            &format!("path = {mnist:?}\nfeatures = \"scattering\"\nscattering_j = 3"),
        ),
        &dir.path().join("x.toml"),
    )
    .expect("valid");
    let e = prepare_data(&s, dir.path()).expect_err("28 is not a multiple of 8");
    let msg = e.to_string();
    assert!(
        msg.contains("data.features") && msg.contains("multiple of 2^J = 8"),
        "{msg}"
    );
    assert_eq!(msg.lines().count(), 1, "{msg}");
}

#[test]
fn fixed_cnns_and_augmentation_are_refused() {
    let text = config_text("cifar10", "features = \"scattering\"").replace(
        "architecture = \"logistic\"",
        "architecture = \"cifar_cnn\"",
    );
    let e = error_of(&text);
    assert!(
        e.contains("data.features") && e.contains("model.architecture"),
        "{e}"
    );
    // Views of scattering features are left-right flips only: a crop (4 pixels by default) or
    // no flip is refused, naming the key.
    let views = |keys: &str| {
        config_text("cifar10", "features = \"scattering\"")
            .replace("[clip]", &format!("[train.augmentation]\n{keys}\n[clip]"))
    };
    for (keys, key) in [
        ("multiplicity = 2", "train.augmentation.crop_padding"),
        (
            "multiplicity = 2\ncrop_padding = 4",
            "train.augmentation.crop_padding",
        ),
        (
            "crop_padding = 0\nhorizontal_flip = false",
            "train.augmentation.horizontal_flip",
        ),
    ] {
        let e = error_of(&views(keys));
        assert!(
            e.contains(key) && e.contains("data.features"),
            "{keys}: {e}"
        );
        assert_eq!(e.lines().count(), 1, "{e}");
    }
    config::load_str(
        &views("multiplicity = 2\ncrop_padding = 0"),
        Path::new("x.toml"),
    )
    .expect("flip views of scattering features are valid");
}

/// `[train.augmentation]` on scattering features: the prepared mirror features are the transform
/// of the mirrored pixels, through the same standardisation, cached beside the others.
#[test]
fn flip_views_use_the_transform_of_the_mirrored_images() {
    let (_dir, mnist, data_dir, file) = mnist_workspace(12);
    let views = "[train.augmentation]\nmultiplicity = 2\ncrop_padding = 0\n[clip]";
    let spec = |data_extra: &str, train_extra: &str| {
        let text = config_text(
            "mnist",
            &format!("path = {mnist:?}\nscale = true\n{data_extra}"),
        )
        .replace("[clip]", train_extra);
        config::load_str(&text, &file).expect("valid")
    };
    let with =
        prepare_data(&spec("features = \"scattering\"", views), &data_dir).expect("prepared");
    let without =
        prepare_data(&spec("features = \"scattering\"", "[clip]"), &data_dir).expect("prepared");
    assert!(without.train_mirrored.is_none());
    assert_eq!(
        with.train, without.train,
        "the plain features do not change"
    );
    let mirrored = with.train_mirrored.as_ref().expect("mirror features");

    // The oracle: the scaled pixels, mirrored, then the transform (no cache).
    let pixels = prepare_data(&spec("", "[clip]"), &data_dir).expect("pixels");
    let flipped = dpx::data::Dataset {
        features: dpx::data::augment::mirror_images(pixels.train.features.view(), [1, 28, 28]),
        ..pixels.train.clone()
    };
    let s = dpx::data::scattering::Scattering2d::new(28, 28, 2, 8).expect("transform");
    let oracle = s.transform_dataset(&flipped).expect("transform");
    assert_eq!(mirrored.features, oracle.features);
    assert_eq!(mirrored.labels, with.train.labels);
    assert_ne!(
        mirrored.features, with.train.features,
        "the images are not symmetric"
    );
    // train, test and the mirror's features are cached.
    let cached = std::fs::read_dir(data_dir.join("cache").join("scattering"))
        .expect("cache dir")
        .count();
    assert_eq!(cached, 3);

    // The same standardisation reaches the mirror: fixed constants on the features.
    let standardized = prepare_data(
        &spec(
            &format!(
                "features = \"scattering\"\nstandardize = \"fixed\"\nstandardize_mean = {:?}\nstandardize_std = {:?}",
                vec![0.5; 81],
                vec![2.0; 81]
            ),
            views,
        ),
        &data_dir,
    )
    .expect("prepared");
    let m = standardized
        .train_mirrored
        .as_ref()
        .expect("mirror features");
    let gap = m
        .features
        .iter()
        .zip(mirrored.features.iter())
        .map(|(a, b)| (a - (b - 0.5) / 2.0).abs())
        .fold(0.0f32, f32::max);
    assert!(gap < 1e-6, "{gap}");
}

/// A run with flip views of scattering features: the same bytes on 1 and 2 threads, and not the
/// run without views (so the views reach the gradients).
#[test]
fn flip_views_of_scattering_features_train_deterministically() {
    let (dir, mnist, data_dir, _) = mnist_workspace(40);
    let write = |name: &str, train_extra: &str| {
        let text = config_text(
            "mnist",
            &format!("path = {mnist:?}\nscale = true\nfeatures = \"scattering\""),
        )
        .replace("[clip]", train_extra)
        .replace("steps = 2", "steps = 6");
        let path = dir.path().join(format!("{name}.toml"));
        std::fs::write(&path, text).expect("write");
        path
    };
    let views = write(
        "views",
        "[train.augmentation]\nmultiplicity = 3\ncrop_padding = 0\n[clip]",
    );
    let plain = write("plain", "[clip]");
    let run = |cfg: &Path, out: &str, threads: &str| {
        let out = dir.path().join(out);
        let status = std::process::Command::new(env!("CARGO_BIN_EXE_dpx"))
            .args(["run", "--quiet", "--threads", threads, "--data-dir"])
            .arg(&data_dir)
            .arg("--out")
            .arg(&out)
            .arg(cfg)
            .status()
            .expect("dpx runs");
        assert!(status.success());
        std::fs::read(out.join("metrics.csv")).expect("metrics")
    };
    let one = run(&views, "v1", "1");
    assert_eq!(one, run(&views, "v2", "2"));
    assert_ne!(one, run(&plain, "p1", "1"));
}

#[test]
fn models_build_on_scattering_features() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mnist = dir.path().join("mnist");
    std::fs::create_dir(&mnist).expect("mkdir");
    mnist::tiny_mnist(&mnist, 12, 7919);
    let base = config_text(
        "mnist",
        &format!("path = {mnist:?}\nfeatures = \"scattering\""),
    );
    let cnn = base.replace(
        "architecture = \"logistic\"",
        "architecture = \"cnn\"\n[[model.layers]]\nkind = \"group_norm\"\ngroups = 27\n[[model.layers]]\nkind = \"conv2d\"\nout_channels = 8\nkernel_size = 3\npadding = 1\n[[model.layers]]\nkind = \"relu\"",
    );
    for text in [base, cnn] {
        let spec = config::load_str(&text, &dir.path().join("x.toml")).expect("valid");
        let e = dpx::train::prepare::Experiment::build(spec, dir.path()).expect("builds");
        assert_eq!(e.data.train.sample_shape, vec![81, 7, 7]);
        assert!(e.model.check_input(81 * 49).is_ok());
    }
}

#[test]
fn input_constants_normalise_the_pixels_before_the_transform() {
    let (_dir, mnist, data_dir, file) = mnist_workspace(12);
    let spec = |extra: &str| scattering_spec(&mnist, &file, extra);
    let plain = prepare_data(&spec(""), &data_dir).expect("prepared");
    // The transform is positively homogeneous: pixels / 2 give features / 2 (a power of two,
    // so up to the FFTs' rounding).
    let halved = prepare_data(
        &spec("scattering_input_mean = [0.0]\nscattering_input_std = [2.0]"),
        &data_dir,
    )
    .expect("prepared");
    let gap = plain
        .train
        .features
        .iter()
        .zip(halved.train.features.iter())
        .map(|(a, b)| (a / 2.0 - b).abs())
        .fold(0.0f32, f32::max);
    assert!(gap < 1e-6, "{gap}");
    // A mean shifts the order-0 channel (the low-pass average) by about the mean; the wavelet
    // channels have zero-mean filters and barely move.
    let shifted = prepare_data(
        &spec("scattering_input_mean = [0.25]\nscattering_input_std = [1.0]"),
        &data_dir,
    )
    .expect("prepared");
    let (a, b) = (plain.train.features.row(0), shifted.train.features.row(0));
    let order0 = (a[24] - b[24]) as f64;
    assert!((order0 - 0.25).abs() < 0.02, "order 0 moved by {order0}");
    let order1 = (a[49 + 24] - b[49 + 24]).abs() as f64;
    assert!(
        order1 < 0.02 * a[49 + 24].abs().max(0.01) as f64 + 1e-3,
        "{order1}"
    );

    let e = error_of(&config_text(
        "mnist",
        "features = \"scattering\"\nscattering_input_mean = [0.5]",
    ));
    assert!(e.contains("data.scattering_input_std"), "{e}");
    let e = error_of(&config_text(
        "mnist",
        "features = \"scattering\"\nscattering_input_mean = [0.5]\nscattering_input_std = [0.0]",
    ));
    assert!(e.contains("data.scattering_input_std"), "{e}");
    let e = error_of(&config_text(
        "mnist",
        "scattering_input_mean = [0.5]\nscattering_input_std = [0.2]",
    ));
    assert!(e.contains("data.scattering_input_mean"), "pixels: {e}");
    let resolved =
        spec("scattering_input_mean = [0.5]\nscattering_input_std = [0.25]").to_resolved_toml();
    assert!(
        resolved.contains("scattering_input_mean = [0.5]")
            && resolved.contains("scattering_input_std = [0.25]"),
        "{resolved}"
    );
}

#[test]
fn plan_only_gives_the_full_plan_and_model_without_computing_the_features() {
    // More examples than the plan-only preparation keeps, so the count must come from all.
    let (_dir, mnist, data_dir, file) = mnist_workspace(150);
    let text = config_text(
        "mnist",
        &format!(
            "path = {mnist:?}\nfeatures = \"scattering\"\nvalidation_fraction = 0.2\n\
             standardize = \"private\"\nstandardize_noise_multiplier = 8.0\n\
             standardize_mean_clip_norm = 1.0\nstandardize_second_moment_clip_norm = 1.5"
        ),
    )
    .replace("[noise]\nnoise_multiplier = 1.0\n", "")
    .replace("delta = 1e-5", "delta = 1e-5\nepsilon = 2.0");
    let spec = config::load_str(&text, &file).expect("valid");
    let planned = Experiment::plan_only(spec.clone(), &data_dir).expect("planned");
    assert!(
        !data_dir.join("cache").exists(),
        "a plan-only build computes no features for the cache"
    );
    let full = Experiment::build(spec, &data_dir).expect("built");
    assert_eq!(full.data.train.len(), 120);
    assert_eq!(planned.plan, full.plan, "same plan, calibration included");
    assert_eq!(planned.model, full.model);
    assert!(planned.plan.privacy.as_ref().is_some_and(|p| p.calibrated));
}
