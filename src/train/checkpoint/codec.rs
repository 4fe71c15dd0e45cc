//! The byte codec of a checkpoint (room: `train`): little-endian integers, floats as their
//! exact bit patterns (f32 and f64 round-trip exactly), length-prefixed sequences, and a
//! [`Reader`] that never trusts a length: every count is checked against the bytes left before
//! anything is allocated, so a damaged or hostile file fails with [`Damaged`] instead of a panic
//! or a huge allocation.
//!
//! Also the codec of the values a seed carries between steps whose types live in other rooms:
//! [`DpEvent`] (recursive, depth-bounded) and the [`MetricsRow`]s written so far.

use crate::privacy::event::DpEvent;
use crate::train::metrics::MetricsRow;

/// Why a checkpoint's bytes could not be read: what was expected where.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{what} at byte {offset}")]
pub struct Damaged {
    pub what: String,
    pub offset: usize,
}

/// Deepest nesting of events accepted (a run's events nest at most four deep).
const MAX_EVENT_DEPTH: u32 = 16;

/// Appends values to a byte buffer.
#[derive(Default)]
pub struct Writer {
    pub bytes: Vec<u8>,
}

impl Writer {
    pub fn u8(&mut self, v: u8) {
        self.bytes.push(v);
    }
    pub fn u32(&mut self, v: u32) {
        self.bytes.extend_from_slice(&v.to_le_bytes());
    }
    pub fn u64(&mut self, v: u64) {
        self.bytes.extend_from_slice(&v.to_le_bytes());
    }
    pub fn u128(&mut self, v: u128) {
        self.bytes.extend_from_slice(&v.to_le_bytes());
    }
    pub fn f64(&mut self, v: f64) {
        self.u64(v.to_bits());
    }
    pub fn bytes(&mut self, v: &[u8]) {
        self.u64(v.len() as u64);
        self.bytes.extend_from_slice(v);
    }
    pub fn str(&mut self, v: &str) {
        self.bytes(v.as_bytes());
    }
    pub fn opt_f64(&mut self, v: Option<f64>) {
        match v {
            None => self.u8(0),
            Some(x) => {
                self.u8(1);
                self.f64(x);
            }
        }
    }
    pub fn opt_u64(&mut self, v: Option<u64>) {
        match v {
            None => self.u8(0),
            Some(x) => {
                self.u8(1);
                self.u64(x);
            }
        }
    }
    pub fn f32s(&mut self, v: &[f32]) {
        self.u64(v.len() as u64);
        for x in v {
            self.u32(x.to_bits());
        }
    }
    pub fn f64s(&mut self, v: &[f64]) {
        self.u64(v.len() as u64);
        for &x in v {
            self.f64(x);
        }
    }
    pub fn u64s(&mut self, v: &[u64]) {
        self.u64(v.len() as u64);
        for &x in v {
            self.u64(x);
        }
    }

    pub fn event(&mut self, e: &DpEvent) {
        match e {
            DpEvent::NoOp => self.u8(0),
            DpEvent::NonPrivate => self.u8(1),
            DpEvent::Gaussian { noise_multiplier } => {
                self.u8(2);
                self.f64(*noise_multiplier);
            }
            DpEvent::Laplace { scale } => {
                self.u8(3);
                self.f64(*scale);
            }
            DpEvent::PoissonSampled { sample_rate, event } => {
                self.u8(4);
                self.f64(*sample_rate);
                self.event(event);
            }
            DpEvent::SampledWithoutReplacement {
                dataset_size,
                batch_size,
                event,
            } => {
                self.u8(5);
                self.u64(*dataset_size);
                self.u64(*batch_size);
                self.event(event);
            }
            DpEvent::RandomAllocation { steps, event } => {
                self.u8(8);
                self.u64(*steps);
                self.event(event);
            }
            DpEvent::SelfComposed { event, count } => {
                self.u8(6);
                self.u64(*count);
                self.event(event);
            }
            DpEvent::Composed(parts) => {
                self.u8(7);
                self.u64(parts.len() as u64);
                for p in parts {
                    self.event(p);
                }
            }
        }
    }

    pub fn metrics_row(&mut self, r: &MetricsRow) {
        self.u64(r.seed);
        self.u64(r.step);
        self.f64(r.epoch);
        self.f64(r.lr);
        self.opt_f64(r.noise_multiplier);
        self.opt_f64(r.noise_std);
        self.opt_f64(r.clip_norm);
        self.opt_u64(r.batch_size.map(|b| b as u64));
        self.opt_f64(r.epsilon);
        self.opt_f64(r.delta);
        self.opt_f64(r.train_loss);
        self.f64(r.test_loss);
        self.f64(r.test_accuracy);
        self.opt_f64(r.validation_loss);
        self.opt_f64(r.validation_accuracy);
        self.opt_f64(r.clipped_fraction_private);
        self.opt_f64(r.clipped_fraction_nonprivate);
        self.opt_f64(r.objective);
        self.opt_f64(r.excess_risk);
        self.opt_f64(r.laplace_scale);
        self.opt_f64(r.step_epsilon);
        self.opt_f64(r.step_size);
        self.opt_f64(r.momentum);
        self.opt_u64(r.stage.map(u64::from));
        self.opt_f64(r.train_set_loss);
        self.opt_f64(r.train_set_accuracy);
        self.opt_f64(r.ema_test_loss);
        self.opt_f64(r.ema_test_accuracy);
        self.opt_f64(r.ema_validation_accuracy);
        match r.gradient_error_nonprivate {
            None => self.u8(0),
            Some(e) => {
                self.u8(1);
                self.opt_f64(e);
            }
        }
    }
}

/// Reads values back from a byte slice, refusing anything that does not fit in it.
pub struct Reader<'a> {
    bytes: &'a [u8],
    pos: usize,
}

impl<'a> Reader<'a> {
    pub fn new(bytes: &'a [u8]) -> Self {
        Reader { bytes, pos: 0 }
    }

    /// A [`Damaged`] error at the current position.
    pub fn damaged(&self, what: impl Into<String>) -> Damaged {
        Damaged {
            what: what.into(),
            offset: self.pos,
        }
    }

    pub fn remaining(&self) -> usize {
        self.bytes.len() - self.pos
    }

    /// Fails unless every byte has been read.
    pub fn finish(&self) -> Result<(), Damaged> {
        if self.remaining() == 0 {
            Ok(())
        } else {
            Err(self.damaged(format!("{} unexpected trailing bytes", self.remaining())))
        }
    }

    pub fn take(&mut self, n: usize, what: &str) -> Result<&'a [u8], Damaged> {
        if n > self.remaining() {
            return Err(self.damaged(format!("{what}: cut short")));
        }
        let s = &self.bytes[self.pos..self.pos + n];
        self.pos += n;
        Ok(s)
    }

    fn array<const N: usize>(&mut self, what: &str) -> Result<[u8; N], Damaged> {
        let s = self.take(N, what)?;
        let mut out = [0u8; N];
        out.copy_from_slice(s);
        Ok(out)
    }

    pub fn u8(&mut self, what: &str) -> Result<u8, Damaged> {
        Ok(self.array::<1>(what)?[0])
    }
    pub fn u32(&mut self, what: &str) -> Result<u32, Damaged> {
        Ok(u32::from_le_bytes(self.array(what)?))
    }
    pub fn u64(&mut self, what: &str) -> Result<u64, Damaged> {
        Ok(u64::from_le_bytes(self.array(what)?))
    }
    pub fn u128(&mut self, what: &str) -> Result<u128, Damaged> {
        Ok(u128::from_le_bytes(self.array(what)?))
    }
    pub fn f64(&mut self, what: &str) -> Result<f64, Damaged> {
        Ok(f64::from_bits(self.u64(what)?))
    }
    pub fn usize(&mut self, what: &str) -> Result<usize, Damaged> {
        let v = self.u64(what)?;
        usize::try_from(v).map_err(|_| self.damaged(format!("{what}: {v} is out of range")))
    }

    /// A length prefix for `elem_bytes`-byte elements, refused when they cannot all be in the
    /// bytes left (so nothing is allocated for a corrupted count).
    pub fn len(&mut self, elem_bytes: usize, what: &str) -> Result<usize, Damaged> {
        let n = self.u64(what)?;
        let fits = usize::try_from(n)
            .ok()
            .and_then(|n| n.checked_mul(elem_bytes.max(1)))
            .is_some_and(|b| b <= self.remaining());
        if !fits {
            return Err(self.damaged(format!(
                "{what}: a length of {n} does not fit in the {} bytes left",
                self.remaining()
            )));
        }
        Ok(n as usize)
    }

    pub fn bytes(&mut self, what: &str) -> Result<&'a [u8], Damaged> {
        let n = self.len(1, what)?;
        self.take(n, what)
    }
    pub fn str(&mut self, what: &str) -> Result<&'a str, Damaged> {
        let b = self.bytes(what)?;
        std::str::from_utf8(b).map_err(|_| self.damaged(format!("{what}: not UTF-8")))
    }
    fn tag(&mut self, what: &str) -> Result<bool, Damaged> {
        match self.u8(what)? {
            0 => Ok(false),
            1 => Ok(true),
            t => Err(self.damaged(format!("{what}: unknown tag {t}"))),
        }
    }
    pub fn opt_f64(&mut self, what: &str) -> Result<Option<f64>, Damaged> {
        Ok(if self.tag(what)? {
            Some(self.f64(what)?)
        } else {
            None
        })
    }
    pub fn opt_u64(&mut self, what: &str) -> Result<Option<u64>, Damaged> {
        Ok(if self.tag(what)? {
            Some(self.u64(what)?)
        } else {
            None
        })
    }
    pub fn f32s(&mut self, what: &str) -> Result<Vec<f32>, Damaged> {
        let n = self.len(4, what)?;
        (0..n)
            .map(|_| Ok(f32::from_bits(self.u32(what)?)))
            .collect()
    }
    pub fn f64s(&mut self, what: &str) -> Result<Vec<f64>, Damaged> {
        let n = self.len(8, what)?;
        (0..n).map(|_| self.f64(what)).collect()
    }
    pub fn u64s(&mut self, what: &str) -> Result<Vec<u64>, Damaged> {
        let n = self.len(8, what)?;
        (0..n).map(|_| self.u64(what)).collect()
    }

    pub fn event(&mut self) -> Result<DpEvent, Damaged> {
        self.event_at(0)
    }

    fn event_at(&mut self, depth: u32) -> Result<DpEvent, Damaged> {
        if depth > MAX_EVENT_DEPTH {
            return Err(self.damaged("event: nested too deeply"));
        }
        let w = "event";
        Ok(match self.u8(w)? {
            0 => DpEvent::NoOp,
            1 => DpEvent::NonPrivate,
            2 => DpEvent::Gaussian {
                noise_multiplier: self.f64(w)?,
            },
            3 => DpEvent::Laplace {
                scale: self.f64(w)?,
            },
            4 => {
                let sample_rate = self.f64(w)?;
                DpEvent::poisson_sampled(sample_rate, self.event_at(depth + 1)?)
            }
            5 => {
                let dataset_size = self.u64(w)?;
                let batch_size = self.u64(w)?;
                DpEvent::sampled_without_replacement(
                    dataset_size,
                    batch_size,
                    self.event_at(depth + 1)?,
                )
            }
            6 => {
                let count = self.u64(w)?;
                self.event_at(depth + 1)?.self_composed(count)
            }
            7 => {
                // Every event takes at least one byte.
                let n = self.len(1, w)?;
                let parts = (0..n)
                    .map(|_| self.event_at(depth + 1))
                    .collect::<Result<Vec<_>, _>>()?;
                DpEvent::Composed(parts)
            }
            8 => {
                let steps = self.u64(w)?;
                DpEvent::random_allocation(steps, self.event_at(depth + 1)?)
            }
            t => return Err(self.damaged(format!("event: unknown tag {t}"))),
        })
    }

    pub fn metrics_row(&mut self) -> Result<MetricsRow, Damaged> {
        let w = "metrics row";
        Ok(MetricsRow {
            seed: self.u64(w)?,
            step: self.u64(w)?,
            epoch: self.f64(w)?,
            lr: self.f64(w)?,
            noise_multiplier: self.opt_f64(w)?,
            noise_std: self.opt_f64(w)?,
            clip_norm: self.opt_f64(w)?,
            batch_size: match self.opt_u64(w)? {
                None => None,
                Some(b) => {
                    Some(usize::try_from(b).map_err(|_| self.damaged("metrics row: batch_size"))?)
                }
            },
            epsilon: self.opt_f64(w)?,
            delta: self.opt_f64(w)?,
            train_loss: self.opt_f64(w)?,
            test_loss: self.f64(w)?,
            test_accuracy: self.f64(w)?,
            validation_loss: self.opt_f64(w)?,
            validation_accuracy: self.opt_f64(w)?,
            clipped_fraction_private: self.opt_f64(w)?,
            clipped_fraction_nonprivate: self.opt_f64(w)?,
            objective: self.opt_f64(w)?,
            excess_risk: self.opt_f64(w)?,
            laplace_scale: self.opt_f64(w)?,
            step_epsilon: self.opt_f64(w)?,
            step_size: self.opt_f64(w)?,
            momentum: self.opt_f64(w)?,
            stage: match self.opt_u64(w)? {
                None => None,
                Some(s) => Some(u32::try_from(s).map_err(|_| self.damaged("metrics row: stage"))?),
            },
            train_set_loss: self.opt_f64(w)?,
            train_set_accuracy: self.opt_f64(w)?,
            ema_test_loss: self.opt_f64(w)?,
            ema_test_accuracy: self.opt_f64(w)?,
            ema_validation_accuracy: self.opt_f64(w)?,
            gradient_error_nonprivate: match self.u8(w)? {
                0 => None,
                1 => Some(self.opt_f64(w)?),
                _ => return Err(self.damaged("metrics row: gradient_error_nonprivate")),
            },
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn floats_round_trip_bit_for_bit() {
        let f32s = [
            0.1f32,
            -0.0,
            f32::MIN_POSITIVE / 3.0,
            f32::NAN,
            f32::INFINITY,
        ];
        let f64s = [0.1f64, -0.0, 5e-324, f64::NAN, f64::NEG_INFINITY, 1.0 / 3.0];
        let mut w = Writer::default();
        w.f32s(&f32s);
        w.f64s(&f64s);
        w.opt_f64(None);
        w.opt_f64(Some(-2.5e-300));
        w.u128(u128::MAX - 7);
        let mut r = Reader::new(&w.bytes);
        let a = r.f32s("a").unwrap();
        let b = r.f64s("b").unwrap();
        assert_eq!(
            a.iter().map(|x| x.to_bits()).collect::<Vec<_>>(),
            f32s.iter().map(|x| x.to_bits()).collect::<Vec<_>>()
        );
        assert_eq!(
            b.iter().map(|x| x.to_bits()).collect::<Vec<_>>(),
            f64s.iter().map(|x| x.to_bits()).collect::<Vec<_>>()
        );
        assert_eq!(r.opt_f64("c").unwrap(), None);
        assert_eq!(r.opt_f64("d").unwrap(), Some(-2.5e-300));
        assert_eq!(r.u128("e").unwrap(), u128::MAX - 7);
        r.finish().unwrap();
    }

    #[test]
    fn events_round_trip_and_nesting_is_bounded() {
        let e = DpEvent::Composed(vec![
            DpEvent::poisson_sampled(
                0.01,
                DpEvent::Composed(vec![DpEvent::gaussian(1.1), DpEvent::gaussian(5.0)]),
            )
            .self_composed(40),
            DpEvent::sampled_without_replacement(100, 10, DpEvent::laplace(2.0)),
            DpEvent::NonPrivate,
            DpEvent::NoOp,
        ]);
        let mut w = Writer::default();
        w.event(&e);
        let mut r = Reader::new(&w.bytes);
        assert_eq!(r.event().unwrap(), e);
        r.finish().unwrap();

        // 10,000 nested self-compositions: refused, no stack overflow.
        let mut deep = Vec::new();
        for _ in 0..10_000 {
            deep.push(6u8);
            deep.extend_from_slice(&2u64.to_le_bytes());
        }
        deep.push(0);
        let err = Reader::new(&deep).event().unwrap_err();
        assert!(err.what.contains("nested"), "{err}");
    }

    #[test]
    fn a_huge_length_is_refused_before_allocating() {
        let mut w = Writer::default();
        w.u64(u64::MAX / 2);
        w.f64(1.0);
        let err = Reader::new(&w.bytes).f64s("velocity").unwrap_err();
        assert!(err.what.contains("does not fit"), "{err}");
        let mut w = Writer::default();
        w.u8(7);
        w.u64(1 << 60);
        assert!(Reader::new(&w.bytes).event().is_err());
    }
}
