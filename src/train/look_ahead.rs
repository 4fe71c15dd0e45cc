//! The next step's batch, gathered while the current step computes (room: `train`).
//!
//! A small model's step on a large dataset spends much of its time copying the batch's rows out
//! of the training set: random rows of a matrix far larger than the caches, so the copy waits on
//! memory (about 0.1 ms for 256 MNIST rows on one AMD EPYC core, a third of a logistic
//! regression's step). On a pool of two or more threads, the training loop draws the next
//! step's indices from *copies* of the sampler and of the seed's sampling stream, and gathers
//! those rows on one worker while the step runs on the others ([`LookAhead::gather`] beside
//! `DpSgdSeed::step` in one `rayon::join`). The real stream is never advanced early: the next
//! step draws its own batch as before and takes the gathered rows only when its indices are the
//! same (they are: the copies replay the same draws), so checkpoints, resumption and every bit
//! of a run are unchanged, on any number of threads.
//!
//! Only stateless samplers look ahead (Poisson and fixed-size: a copy is a few numbers), and
//! only batches taken as they are (no augmented views, whose draws come from another stream).

use ndarray::{Array2, ArrayView2};
use rand_chacha::ChaCha12Rng;

use crate::data::gather_rows;
use crate::data::sampler::{FixedSizeSampler, PoissonSampler, Sampler};

/// A sampler whose draw depends on the stream only (no state of its own).
#[derive(Debug, Clone)]
enum Stateless {
    Poisson(PoissonSampler),
    FixedSize(FixedSizeSampler),
}

impl Stateless {
    fn of(sampler: &Sampler) -> Option<Self> {
        match sampler {
            Sampler::Poisson(s) => Some(Stateless::Poisson(s.clone())),
            Sampler::FixedSize(s) => Some(Stateless::FixedSize(s.clone())),
            _ => None,
        }
    }

    fn draw(&self, rng: &mut ChaCha12Rng, out: &mut Vec<usize>) {
        match self {
            Stateless::Poisson(s) => s.next_batch_into(rng, out),
            Stateless::FixedSize(s) => s.next_batch_into(rng, out),
        }
    }
}

/// What the gather of step t + 1's rows needs, taken before step t runs: a copy of the sampler
/// and of the sampling stream as step t will find it, and the training features.
pub(crate) struct LookAhead<'a> {
    sampler: Stateless,
    rng: ChaCha12Rng,
    features: ArrayView2<'a, f32>,
}

/// Rows gathered ahead: the batch's indices and its rows of the training features.
pub(crate) struct Gathered {
    pub indices: Vec<usize>,
    pub rows: Array2<f32>,
}

impl<'a> LookAhead<'a> {
    /// A look-ahead past the batch the stream `rng` gives next, or `None` where it would not
    /// pay (one thread) or could not be exact (a sampler with state of its own).
    pub(crate) fn new(
        sampler: &Sampler,
        rng: &ChaCha12Rng,
        features: ArrayView2<'a, f32>,
    ) -> Option<Self> {
        if rayon::current_num_threads() < 2 {
            return None;
        }
        Some(LookAhead {
            sampler: Stateless::of(sampler)?,
            rng: rng.clone(),
            features,
        })
    }

    /// Replay the current step's draw, then draw the next step's batch and gather its rows.
    pub(crate) fn gather(mut self) -> Gathered {
        let mut indices = Vec::new();
        self.sampler.draw(&mut self.rng, &mut indices);
        self.sampler.draw(&mut self.rng, &mut indices);
        let rows = gather_rows(self.features, &indices);
        Gathered { indices, rows }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;

    #[test]
    fn the_look_ahead_gathers_the_batch_after_next() {
        let x = Array2::from_shape_fn((500, 3), |(i, j)| (i * 3 + j) as f32);
        let pool = rayon::ThreadPoolBuilder::new()
            .num_threads(2)
            .build()
            .unwrap();
        for mut sampler in [
            Sampler::Poisson(PoissonSampler::new(500, 0.05).unwrap()),
            Sampler::FixedSize(FixedSizeSampler::new(500, 20).unwrap()),
        ] {
            let mut rng = ChaCha12Rng::seed_from_u64(3);
            for _ in 0..4 {
                let ahead = pool
                    .install(|| LookAhead::new(&sampler, &rng, x.view()))
                    .expect("a stateless sampler on two threads looks ahead");
                let got = ahead.gather();
                // The step's own draw moves the real stream by one batch; the next draw (from a
                // copy, as the next step will make it) is the batch gathered ahead.
                let this = sampler.next_batch(&mut rng);
                let next = sampler.next_batch(&mut rng.clone());
                assert_ne!(this, next);
                assert_eq!(got.indices, next);
                assert_eq!(got.rows, x.select(ndarray::Axis(0), &next));
            }
        }
    }

    #[test]
    fn one_thread_or_a_stateful_sampler_does_not_look_ahead() {
        let x = Array2::<f32>::zeros((10, 2));
        let rng = ChaCha12Rng::seed_from_u64(1);
        let poisson = Sampler::Poisson(PoissonSampler::new(10, 0.5).unwrap());
        let fixed_order = Sampler::FixedOrder(
            crate::data::sampler::FixedOrderSampler::new(10, 5, &mut rng.clone()).unwrap(),
        );
        for (threads, sampler) in [(1, &poisson), (2, &fixed_order)] {
            let pool = rayon::ThreadPoolBuilder::new()
                .num_threads(threads)
                .build()
                .unwrap();
            let ahead = pool.install(|| LookAhead::new(sampler, &rng, x.view()));
            assert!(ahead.is_none(), "{threads} threads, {sampler:?}");
        }
    }
}
