//! Criterion benchmarks of the model room's kernels and of one DP-SGD step (speed targets live
//! here and in `dpx bench`, never in timed unit tests).
//!
//! - `dense_per_sample_norms`: per-example norms of the MLP of `mlp_mnist` (norm factorisation).
//! - `conv_im2col`: im2col of the second convolution of `cifar_cnn` at batch 128.
//! - `dp_step`: forward, per-sample gradients, flat clipping, noise, for `logreg_mnist` and
//!   `cnn_mnist` at batch 256, one thread.
//! - `gaussian_noise`: 669,706 standard normals (mlp_mnist's noise) by the mechanism (the bulk
//!   sampler of `privacy::normal`) and one ChaCha12 ziggurat draw at a time.
//! - `max_pool`: the first pooling layer of `mnist_cnn` at batch 256.

#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

use criterion::{BatchSize, Criterion, criterion_group, criterion_main};
use dpx::grad::PerSampleGradients;
use dpx::model::ModelSpec;
use dpx::model::kernels::{Window, im2col, max_pool};
use dpx::privacy::clip::flat::privatize_flat;
use dpx::privacy::mechanism::add_gaussian_noise;
use ndarray::Array2;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use rand_distr::StandardNormal;
use std::hint::black_box;

/// Run every kernel on one thread: the global rayon pool is built with one thread (criterion's
/// state is not `Send`, so the benches cannot be moved into a scoped pool).
fn one_thread() {
    let _ = rayon::ThreadPoolBuilder::new()
        .num_threads(1)
        .build_global();
}

fn random(rows: usize, cols: usize, seed: u64) -> Array2<f32> {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    Array2::from_shape_fn((rows, cols), |_| rng.sample::<f32, _>(StandardNormal))
}

fn dense_per_sample_norms(c: &mut Criterion) {
    let model = ModelSpec::named("mlp_mnist").unwrap().build().unwrap();
    let params = model.init_params(0);
    let x = random(256, 784, 1);
    let labels: Vec<usize> = (0..256).map(|i| i % 10).collect();
    one_thread();
    {
        c.bench_function("dense_per_sample_norms/mlp_mnist/256", |b| {
            // Setup (not timed): the forward and backward pass; timed: the norms alone.
            b.iter_batched(
                || model.per_sample(params.view(), x.view(), &labels).unwrap(),
                |g| black_box(g.norms()),
                BatchSize::LargeInput,
            )
        });
    }
}

fn conv_im2col(c: &mut Criterion) {
    // cifar_cnn's second convolution: 32 channels, 32x32, kernel 3, padding 1.
    let g = Window {
        channels: 32,
        height: 32,
        width: 32,
        kernel: 3,
        stride: 1,
        padding: 1,
        out_height: 32,
        out_width: 32,
    };
    let x = random(128, 32 * 32 * 32, 2);
    one_thread();
    {
        c.bench_function("conv_im2col/cifar_conv2/128", |b| {
            b.iter(|| black_box(im2col(x.view(), &g)))
        });
    }
}

fn dp_step(c: &mut Criterion) {
    for name in ["logreg_mnist", "mnist_cnn"] {
        let model = ModelSpec::named(name).unwrap().build().unwrap();
        let params = model.init_params(0);
        let x = random(256, model.input_size(), 3);
        let labels: Vec<usize> = (0..256).map(|i| i % 10).collect();
        let mut rng = ChaCha8Rng::seed_from_u64(4);
        one_thread();
        {
            c.bench_function(&format!("dp_step/{name}/256"), |b| {
                b.iter(|| {
                    let g = model.per_sample(params.view(), x.view(), &labels).unwrap();
                    black_box(privatize_flat(&g, 1.0, 1.0, &mut rng).unwrap())
                })
            });
        }
    }
}

fn gaussian_noise(c: &mut Criterion) {
    // mlp_mnist's 669,706 parameters: the mechanism (bulk sampler of privacy::normal, what every
    // seeded run and `dpx bench` use) against one rand_distr ziggurat draw per coordinate from
    // the run's ChaCha12 stream (what runs did before).
    let n = 669_706;
    let mut sum = ndarray::Array1::<f64>::zeros(n);
    let mut rng = rand_chacha::ChaCha12Rng::seed_from_u64(5);
    one_thread();
    c.bench_function("gaussian_noise/mechanism/669706", |b| {
        b.iter(|| add_gaussian_noise(sum.view_mut(), 1.0, 1.0, &mut rng).unwrap())
    });
    c.bench_function("gaussian_noise/per_draw_chacha12/669706", |b| {
        b.iter(|| {
            for v in sum.iter_mut() {
                *v += rng.sample::<f64, _>(StandardNormal);
            }
        })
    });
}

fn max_pool_kernel(c: &mut Criterion) {
    // The first pooling layer of mnist_cnn (2x2, stride 1, on 14x14x16) at batch 256.
    let g = Window {
        channels: 16,
        height: 14,
        width: 14,
        kernel: 2,
        stride: 1,
        padding: 0,
        out_height: 13,
        out_width: 13,
    };
    let x = random(256, 14 * 14 * 16, 6);
    one_thread();
    c.bench_function("max_pool/mnist_pool1/256", |b| {
        b.iter(|| black_box(max_pool(x.view(), &g)))
    });
}

criterion_group! {
    name = benches;
    config = Criterion::default().sample_size(10);
    targets = dense_per_sample_norms, conv_im2col, dp_step, gaussian_noise, max_pool_kernel
}
criterion_main!(benches);
