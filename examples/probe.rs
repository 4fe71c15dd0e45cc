use dpx::grad::PerSampleGradients;
use dpx::model::ModelSpec;
use ndarray::{Array1, Array2};
use rand::{Rng, SeedableRng};
use rand_distr::StandardNormal;
use std::time::Instant;
fn main() {
    let name = std::env::args().nth(1).unwrap();
    let model = ModelSpec::named(&name).unwrap().build().unwrap();
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(0);
    let x = Array2::from_shape_fn((256, model.input_size()), |_| {
        rng.sample::<f32, _>(StandardNormal)
    });
    let y: Vec<usize> = (0..256).map(|i| i % 10).collect();
    let p = model.init_params(0);
    dpx::model::with_threads(1, || {
        for _ in 0..4 {
            let t = Instant::now();
            let g = model.per_sample(p.view(), x.view(), &y).unwrap();
            let t1 = t.elapsed();
            let n = g.norms();
            let t2 = t.elapsed();
            let w = dpx::privacy::clip::flat::flat_clip_weights(&n, 1.0).unwrap();
            let mut s = g.weighted_sum(&w);
            let t3 = t.elapsed();
            dpx::privacy::mechanism::add_gaussian_noise(s.view_mut(), 1.0, 1.0, &mut rng).unwrap();
            let t4 = t.elapsed();
            let _ = g.sum();
            let t5 = t.elapsed();
            let mut z = Array1::<f64>::zeros(s.len());
            let mut r2 = rand::rngs::SmallRng::seed_from_u64(1);
            dpx::privacy::mechanism::add_gaussian_noise(z.view_mut(), 1.0, 1.0, &mut r2).unwrap();
            let t6 = t.elapsed();
            println!(
                "per_sample {t1:?} norms {:?} wsum {:?} noise {:?} sum {:?} noise-smallrng {:?}",
                t2 - t1,
                t3 - t2,
                t4 - t3,
                t5 - t4,
                t6 - t5
            );
        }
    })
    .unwrap();
}
