//! Preprocessing against hand-computed values, and the synthetic generators' determinism and
//! defining properties.

use dpx::data::preprocess::{
    Pca, StandardizeMode, Standardizer, clip_row_norms, keep_classes, pca, row_norms,
    scale_max_row_norm, scale_to_unit, standardize, subsample, train_validation_split,
};
use dpx::data::synthetic::{GaussianMixture, SyntheticSpec, TwoClusters, UniformLogistic};
use dpx::data::{DataError, Dataset, TrainTest};
use ndarray::{Array2, array};

fn ds(features: Array2<f32>, labels: Vec<usize>, num_classes: usize) -> Dataset {
    let d = features.ncols();
    Dataset {
        features,
        labels,
        sample_shape: vec![d],
        num_classes,
    }
}

fn close(a: f32, b: f64, tol: f64) -> bool {
    (f64::from(a) - b).abs() <= tol
}

#[test]
fn scale_to_unit_divides_by_255() {
    let mut d = ds(array![[0.0, 255.0, 51.0]], vec![0], 1);
    scale_to_unit(&mut d);
    assert_eq!(d.features, array![[0.0, 1.0, 0.2]]);
}

/// Columns [1, 3, 5] and [10, 10, 40]: means 3 and 20, population stds √(8/3) and √200 (by
/// hand), so column 0 becomes [−√1.5, 0, √1.5] and column 1 [−1/√2, −1/√2, √2].
#[test]
fn standardize_per_feature_uses_training_statistics() {
    let mut data = TrainTest {
        train: ds(
            array![[1.0, 10.0], [3.0, 10.0], [5.0, 40.0]],
            vec![0, 0, 1],
            2,
        ),
        test: ds(array![[3.0, 20.0], [5.0, 34.142_136]], vec![0, 1], 2),
    };
    let s = standardize(&mut data, StandardizeMode::PerFeature).unwrap();
    assert!((s.mean[0] - 3.0).abs() < 1e-12 && (s.mean[1] - 20.0).abs() < 1e-12);
    assert!((s.std[0] - (8.0f64 / 3.0).sqrt()).abs() < 1e-12);
    assert!((s.std[1] - 200.0f64.sqrt()).abs() < 1e-12);
    let t = &data.train.features;
    let r = 1.5f64.sqrt();
    assert!(close(t[[0, 0]], -r, 1e-6) && close(t[[1, 0]], 0.0, 1e-6) && close(t[[2, 0]], r, 1e-6));
    let h = std::f64::consts::FRAC_1_SQRT_2;
    assert!(close(t[[0, 1]], -h, 1e-6) && close(t[[2, 1]], 2.0f64.sqrt(), 1e-6));
    // Test uses the train statistics: (3−3)/·, (20−20)/· → 0; (34.142136−20)/√200 = 1.
    assert!(close(data.test.features[[0, 0]], 0.0, 1e-6));
    assert!(close(data.test.features[[0, 1]], 0.0, 1e-6));
    assert!(close(data.test.features[[1, 1]], 1.0, 1e-6));
}

/// Per channel on shape [2, 1, 2]: channel 0 holds 0, 2, 4, 6 (mean 3, std √5); channel 1 is
/// constant 10 (std 0 → 1, so it becomes 0).
#[test]
fn standardize_per_channel_and_constant_channel() {
    let mut d = Dataset {
        features: array![[0.0, 2.0, 10.0, 10.0], [4.0, 6.0, 10.0, 10.0]],
        labels: vec![0, 1],
        sample_shape: vec![2, 1, 2],
        num_classes: 2,
    };
    let s = Standardizer::fit(&d, StandardizeMode::PerChannel).unwrap();
    assert_eq!(s.mean, vec![3.0, 3.0, 10.0, 10.0]);
    assert!((s.std[0] - 5.0f64.sqrt()).abs() < 1e-12);
    assert_eq!(s.std[2], 1.0);
    s.apply(&mut d).unwrap();
    assert!(close(d.features[[0, 0]], -3.0 / 5.0f64.sqrt(), 1e-6));
    assert!(close(d.features[[1, 1]], 3.0 / 5.0f64.sqrt(), 1e-6));
    assert_eq!(d.features[[0, 2]], 0.0);
    // Per channel needs image data.
    let flat = ds(array![[1.0, 2.0]], vec![0], 1);
    assert!(matches!(
        Standardizer::fit(&flat, StandardizeMode::PerChannel),
        Err(DataError::InvalidParameter { .. })
    ));
    // A fitted standardizer refuses data of another width.
    assert!(matches!(
        s.apply(&mut ds(array![[1.0]], vec![0], 1)),
        Err(DataError::Inconsistent { .. })
    ));
}

/// Centre per feature, one global std: columns [0, 2] and [0, 6] centre to [−1, 1] and
/// [−3, 3]; global population std over the four centred values is √((1+1+9+9)/4) = √5.
#[test]
fn standardize_center_global_std() {
    let mut d = ds(array![[0.0, 0.0], [2.0, 6.0]], vec![0, 1], 2);
    let s = Standardizer::fit(&d, StandardizeMode::CenterGlobalStd).unwrap();
    s.apply(&mut d).unwrap();
    let r5 = 5.0f64.sqrt();
    assert!(close(d.features[[0, 0]], -1.0 / r5, 1e-6));
    assert!(close(d.features[[1, 1]], 3.0 / r5, 1e-6));
}

#[test]
fn clip_and_scale_row_norms() {
    let mut d = ds(array![[3.0, 4.0], [0.3, 0.4]], vec![0, 1], 2);
    clip_row_norms(&mut d, 1.0).unwrap();
    assert!(close(d.features[[0, 0]], 0.6, 1e-6) && close(d.features[[0, 1]], 0.8, 1e-6));
    assert_eq!(d.features.row(1).to_vec(), vec![0.3, 0.4]);
    assert!(matches!(
        clip_row_norms(&mut d, 0.0),
        Err(DataError::InvalidParameter { .. })
    ));

    // Largest train norm 5 → factor 10/5 = 2 for train and test alike.
    let mut data = TrainTest {
        train: ds(array![[3.0, 4.0], [1.0, 0.0]], vec![0, 1], 2),
        test: ds(array![[6.0, 8.0]], vec![0], 2),
    };
    let f = scale_max_row_norm(&mut data, 10.0).unwrap();
    assert_eq!(f, 2.0);
    assert_eq!(row_norms(&data.train), vec![10.0, 2.0]);
    assert_eq!(data.test.features, array![[12.0, 16.0]]);
}

#[test]
fn keep_classes_relabels_in_the_given_order() {
    let d = ds(
        array![[0.0], [1.0], [2.0], [3.0], [4.0]],
        vec![3, 5, 1, 5, 3],
        10,
    );
    let k = keep_classes(&d, &[3, 5]).unwrap();
    assert_eq!(k.labels, vec![0, 1, 1, 0]);
    assert_eq!(k.features.column(0).to_vec(), vec![0.0, 1.0, 3.0, 4.0]);
    assert_eq!(k.num_classes, 2);
    assert_eq!(keep_classes(&d, &[5, 3]).unwrap().labels, vec![1, 0, 0, 1]);
    assert!(matches!(
        keep_classes(&d, &[3, 3]),
        Err(DataError::InvalidParameter { .. })
    ));
    assert!(matches!(
        keep_classes(&d, &[10]),
        Err(DataError::InvalidParameter { .. })
    ));
}

fn numbered(n: usize) -> Dataset {
    ds(
        Array2::from_shape_fn((n, 1), |(i, _)| i as f32),
        (0..n).map(|i| i % 3).collect(),
        3,
    )
}

#[test]
fn subsample_is_deterministic_ordered_and_a_subset() {
    let d = numbered(100);
    let a = subsample(&d, 30, 7).unwrap();
    assert_eq!(a, subsample(&d, 30, 7).unwrap());
    assert_ne!(a, subsample(&d, 30, 8).unwrap());
    let ids: Vec<usize> = a.features.column(0).iter().map(|&x| x as usize).collect();
    assert_eq!(ids.len(), 30);
    assert!(ids.windows(2).all(|w| w[0] < w[1]));
    assert!(
        ids.iter()
            .all(|&i| a.labels[ids.iter().position(|&j| j == i).unwrap()] == i % 3)
    );
    assert!(matches!(
        subsample(&d, 101, 0),
        Err(DataError::InvalidParameter { .. })
    ));
}

#[test]
fn train_validation_split_partitions_deterministically() {
    let d = numbered(50);
    let (t, v) = train_validation_split(&d, 10, 3).unwrap();
    assert_eq!((t.len(), v.len()), (40, 10));
    let mut all: Vec<usize> = t
        .features
        .column(0)
        .iter()
        .chain(v.features.column(0).iter())
        .map(|&x| x as usize)
        .collect();
    all.sort_unstable();
    assert_eq!(all, (0..50).collect::<Vec<_>>());
    assert_eq!(
        (t.clone(), v.clone()),
        train_validation_split(&d, 10, 3).unwrap()
    );
    assert_ne!(v, train_validation_split(&d, 10, 4).unwrap().1);
    assert!(train_validation_split(&d, 50, 0).is_err());
}

/// Points (±2, 0) and (0, ±1): mean 0, covariance (divisor n − 1 = 3) diag(8/3, 2/3) by hand,
/// so the components are e_x then e_y with variances 8/3 and 2/3.
#[test]
fn pca_on_a_hand_computed_example() {
    let train = ds(
        array![[-2.0, 0.0], [2.0, 0.0], [0.0, -1.0], [0.0, 1.0]],
        vec![0, 0, 1, 1],
        2,
    );
    let p = Pca::fit(&train, 2).unwrap();
    assert!((p.explained_variance[0] - 8.0 / 3.0).abs() < 1e-12);
    assert!((p.explained_variance[1] - 2.0 / 3.0).abs() < 1e-12);
    assert!((p.total_variance - 10.0 / 3.0).abs() < 1e-12);
    assert!((p.components[[0, 0]] - 1.0).abs() < 1e-12 && p.components[[0, 1]].abs() < 1e-12);
    assert!((p.components[[1, 1]] - 1.0).abs() < 1e-12);
    let test = ds(array![[1.0, 5.0]], vec![0], 2);
    let t = p.transform(&test).unwrap();
    assert_eq!(t.sample_shape, vec![2]);
    assert!(close(t.features[[0, 0]], 1.0, 1e-6) && close(t.features[[0, 1]], 5.0, 1e-6));
    let one = Pca::fit(&train, 1).unwrap().transform(&train).unwrap();
    assert_eq!(one.features.column(0).to_vec(), vec![-2.0, 2.0, 0.0, 0.0]);
    assert!(Pca::NOTE.contains("not differentially private"));
    assert!(matches!(
        Pca::fit(&train, 3),
        Err(DataError::InvalidParameter { .. })
    ));
}

/// On 300 Gaussian points in 30 dimensions: components orthonormal, each explained variance
/// equals the (n − 1)-variance of the projected training data, decreasing.
#[test]
fn pca_components_are_orthonormal_and_explain_the_projected_variance() {
    let g = GaussianMixture {
        n_train: 300,
        n_test: 10,
        dim: 30,
        num_classes: 3,
        separation: 6.0,
        noise_std: 1.0,
    }
    .generate(11)
    .unwrap();
    let (proj, p) = pca(&g, 5).unwrap();
    let gram = p.components.dot(&p.components.t());
    for i in 0..5 {
        for j in 0..5 {
            let want = if i == j { 1.0 } else { 0.0 };
            assert!((gram[[i, j]] - want).abs() < 1e-9, "gram {i} {j}");
        }
    }
    for k in 0..5 {
        let col: Vec<f64> = proj
            .train
            .features
            .column(k)
            .iter()
            .map(|&x| f64::from(x))
            .collect();
        let mean = col.iter().sum::<f64>() / 300.0;
        let var = col.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / 299.0;
        assert!(
            (var - p.explained_variance[k]).abs() <= 1e-4 * p.explained_variance[k],
            "{k}"
        );
        if k > 0 {
            assert!(p.explained_variance[k] <= p.explained_variance[k - 1]);
        }
    }
    assert_eq!(proj.test.num_features(), 5);
}

// ---------------------------------------------------------------- synthetic

#[test]
fn synthetic_generators_are_deterministic_from_the_seed() {
    let specs = [
        SyntheticSpec::TwoClusters(TwoClusters {
            n_train: 50,
            n_test: 10,
            ..TwoClusters::default()
        }),
        SyntheticSpec::UniformLogistic(UniformLogistic {
            n_train: 50,
            n_test: 10,
            ..UniformLogistic::default()
        }),
        SyntheticSpec::GaussianMixture(GaussianMixture::default()),
    ];
    for spec in specs {
        let a = spec.generate(42).unwrap();
        assert_eq!(a, spec.generate(42).unwrap());
        assert_ne!(a, spec.generate(43).unwrap());
        a.check_consistent().unwrap();
    }
}

/// The paper's set (D = 100, distance 10, N = 1000): class means ≈ 10 apart (expected
/// √(100 + D·σ²·(1/n₀ + 1/n₁)) ≈ 10.02 for n₀ ≈ n₁ ≈ 500) and every example on its class's
/// side of the mid-plane whose normal is the sign pattern of the mean difference.
#[test]
fn two_clusters_are_separable_at_distance_ten() {
    let tt = TwoClusters::default().generate(1).unwrap();
    let d = &tt.train;
    assert_eq!((d.len(), d.num_features(), d.num_classes), (1000, 100, 2));
    let mut mean = [vec![0.0f64; 100], vec![0.0f64; 100]];
    let mut count = [0usize; 2];
    for (row, &y) in d.features.rows().into_iter().zip(&d.labels) {
        count[y] += 1;
        for (m, &x) in mean[y].iter_mut().zip(row) {
            *m += f64::from(x);
        }
    }
    for c in 0..2 {
        mean[c].iter_mut().for_each(|m| *m /= count[c] as f64);
    }
    let diff: Vec<f64> = mean[1].iter().zip(&mean[0]).map(|(a, b)| a - b).collect();
    let dist = diff.iter().map(|x| x * x).sum::<f64>().sqrt();
    assert!((dist - 10.0).abs() < 0.3, "distance {dist}");
    // Binomial(1000, 1/2): 5 standard deviations is ±79.
    assert!((count[1] as i64 - 500).abs() < 79, "{count:?}");
    for set in [&tt.train, &tt.test] {
        for (row, &y) in set.features.rows().into_iter().zip(&set.labels) {
            let proj: f64 = row
                .iter()
                .zip(&diff)
                .map(|(&x, s)| f64::from(x) * s.signum())
                .sum();
            assert_eq!(proj > 0.0, y == 1);
        }
    }
}

#[test]
fn uniform_logistic_features_are_uniform_and_l1_bounded() {
    let tt = UniformLogistic {
        n_train: 20_000,
        n_test: 100,
        ..UniformLogistic::default()
    }
    .generate(5)
    .unwrap();
    let f = &tt.train.features;
    assert!(f.iter().all(|&x| (0.0..=1.0).contains(&x)));
    // Mean of U[0,1] is 1/2 with standard error √(1/12 / (n d)) = 4.6e−4; 5 SE.
    let mean = f.iter().map(|&x| f64::from(x)).sum::<f64>() / f.len() as f64;
    assert!(
        (mean - 0.5).abs() < 5.0 * (1.0 / 12.0 / f.len() as f64).sqrt(),
        "{mean}"
    );
    // With d = 50 > l1_radius = 20 rows are rescaled to ‖u‖₁ ≤ 20.
    let wide = UniformLogistic {
        n_train: 100,
        n_test: 1,
        dim: 50,
        l1_radius: 20.0,
    }
    .generate(5)
    .unwrap();
    for row in wide.train.features.rows() {
        assert!(row.iter().map(|&x| f64::from(x)).sum::<f64>() <= 20.0 + 1e-4);
    }
    // Labels come from one fixed hyperplane through the origin: a perceptron through the
    // origin separates the noise-free training set (it converges on separable data).
    let d = &tt.train;
    let mut w = vec![0.0f64; d.num_features()];
    let mut mistakes = usize::MAX;
    for _ in 0..200 {
        mistakes = 0;
        for (row, &y) in d.features.rows().into_iter().zip(&d.labels) {
            let s: f64 = row.iter().zip(&w).map(|(&x, w)| f64::from(x) * w).sum();
            let z = if y == 1 { 1.0 } else { -1.0 };
            if s * z <= 0.0 {
                mistakes += 1;
                w.iter_mut()
                    .zip(row)
                    .for_each(|(w, &x)| *w += z * f64::from(x));
            }
        }
        if mistakes == 0 {
            break;
        }
    }
    assert!(mistakes < d.len() / 100, "perceptron mistakes {mistakes}");
}

/// Default mixture (4 classes, means 4σ apart): a nearest-centroid rule fitted on train scores
/// far above chance (0.25) on test. Pairwise error Φ(−2) = 0.0228, so by the union bound over
/// three rivals accuracy ≥ 1 − 3·0.0228 ≈ 0.93 in expectation; assert 0.85.
#[test]
fn gaussian_mixture_is_learnable_quickly() {
    let spec = GaussianMixture::default();
    let tt = spec.generate(9).unwrap();
    let (k, d) = (spec.num_classes, spec.dim);
    let mut centroids = vec![vec![0.0f64; d]; k];
    let mut count = vec![0usize; k];
    for (row, &y) in tt.train.features.rows().into_iter().zip(&tt.train.labels) {
        count[y] += 1;
        centroids[y]
            .iter_mut()
            .zip(row)
            .for_each(|(c, &x)| *c += f64::from(x));
    }
    for c in 0..k {
        centroids[c].iter_mut().for_each(|v| *v /= count[c] as f64);
    }
    let correct = tt
        .test
        .features
        .rows()
        .into_iter()
        .zip(&tt.test.labels)
        .filter(|(row, y)| {
            let dist = |c: &Vec<f64>| -> f64 {
                row.iter()
                    .zip(c)
                    .map(|(&x, m)| (f64::from(x) - m).powi(2))
                    .sum()
            };
            let best = (0..k)
                .min_by(|&a, &b| dist(&centroids[a]).total_cmp(&dist(&centroids[b])))
                .unwrap();
            best == **y
        })
        .count();
    let acc = correct as f64 / tt.test.len() as f64;
    assert!(acc > 0.85, "accuracy {acc}");
}

#[test]
fn synthetic_parameters_are_checked() {
    let bad = [
        SyntheticSpec::TwoClusters(TwoClusters {
            distance: 0.0,
            ..TwoClusters::default()
        }),
        SyntheticSpec::GaussianMixture(GaussianMixture {
            num_classes: 1,
            ..GaussianMixture::default()
        }),
        SyntheticSpec::UniformLogistic(UniformLogistic {
            n_train: 0,
            ..UniformLogistic::default()
        }),
    ];
    for spec in bad {
        assert!(matches!(
            spec.generate(0),
            Err(DataError::InvalidParameter { .. })
        ));
    }
    let huge = SyntheticSpec::GaussianMixture(GaussianMixture {
        n_train: usize::MAX / 2,
        ..GaussianMixture::default()
    });
    assert!(matches!(huge.generate(0), Err(DataError::TooLarge { .. })));
}

/// The MNIST35 recipe of the dynamic-noise paper (Sec. 5) on a 10-class mixture: keep 3 and 5,
/// subsample, PCA, centre + global std, scale the largest train row norm to 10.
#[test]
fn pipeline_applies_steps_in_order_and_records_notes() {
    use dpx::data::preprocess::{Step, apply_steps};
    let data = GaussianMixture {
        n_train: 400,
        n_test: 200,
        dim: 12,
        num_classes: 10,
        separation: 5.0,
        noise_std: 1.0,
    }
    .generate(3)
    .unwrap();
    let steps = [
        Step::KeepClasses(vec![3, 5]),
        Step::SubsampleTrain { n: 50 },
        Step::Pca { components: 4 },
        Step::Standardize(StandardizeMode::CenterGlobalStd),
        Step::ScaleMaxRowNorm { max_norm: 10.0 },
    ];
    let p = apply_steps(data.clone(), &steps, 17).unwrap();
    assert_eq!(p.data.train.len(), 50);
    assert_eq!(
        (p.data.train.num_features(), p.data.test.num_features()),
        (4, 4)
    );
    assert_eq!((p.data.train.num_classes, p.data.test.num_classes), (2, 2));
    let largest = row_norms(&p.data.train).into_iter().fold(0.0, f64::max);
    assert!((largest - 10.0).abs() < 1e-5, "{largest}");
    assert!(p.notes.iter().any(|n| n == Pca::NOTE));
    assert_eq!(p, apply_steps(data.clone(), &steps, 17).unwrap());
    assert_ne!(p, apply_steps(data.clone(), &steps, 18).unwrap());

    let held = apply_steps(data, &[Step::ValidationAsTest { size: 100 }], 1).unwrap();
    assert_eq!((held.data.train.len(), held.data.test.len()), (300, 100));
    assert!(held.notes[0].contains("held-out"));
}

#[test]
fn fixed_standardization_uses_only_the_given_constants() {
    // Two channels of 1×2 pixels: constants per channel expand over the pixels, per feature
    // apply one by one, and any other length is an error. The data's own statistics play no
    // part: two datasets of the same shape get the same map.
    let image = |rows: Array2<f32>| Dataset {
        features: rows,
        labels: vec![0, 1],
        sample_shape: vec![2, 1, 2],
        num_classes: 2,
    };
    let mut a = image(array![[1.0, 2.0, 3.0, 4.0], [5.0, 6.0, 7.0, 8.0]]);
    let b = image(array![[100.0, 0.0, 0.0, 0.0], [0.0, 0.0, 0.0, 100.0]]);
    let st = Standardizer::fixed(&a, &[1.0, 2.0], &[2.0, 4.0]).unwrap();
    assert_eq!(st.mean, vec![1.0, 1.0, 2.0, 2.0]);
    assert_eq!(st.std, vec![2.0, 2.0, 4.0, 4.0]);
    assert_eq!(
        st,
        Standardizer::fixed(&b, &[1.0, 2.0], &[2.0, 4.0]).unwrap()
    );
    st.apply(&mut a).unwrap();
    assert_eq!(
        a.features,
        array![[0.0, 0.5, 0.25, 0.5], [2.0, 2.5, 1.25, 1.5]]
    );
    let per_feature = Standardizer::fixed(&b, &[0.0, 1.0, 2.0, 3.0], &[1.0; 4]).unwrap();
    assert_eq!(per_feature.mean, vec![0.0, 1.0, 2.0, 3.0]);
    assert!(Standardizer::fixed(&b, &[0.0; 3], &[1.0; 3]).is_err());
    assert!(Standardizer::fixed(&b, &[0.0; 2], &[1.0, 0.0]).is_err());
}
