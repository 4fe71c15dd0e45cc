//! Hand-computed values of every shape (mpmath, 30 digits, from the formulas cited in the
//! module documentation).

use super::*;

fn close(a: f64, b: f64) {
    assert!((a - b).abs() <= 1e-13 * b.abs().max(1.0), "{a} vs {b}");
}

#[test]
fn constant_is_one() {
    assert_eq!(NoiseShape::Constant.at(0), 1.0);
    assert_eq!(NoiseShape::Constant.at(123_456), 1.0);
}

#[test]
fn adp_follows_the_learning_rate() {
    // S1 (docs/methods/adp_sgd.md §1.2): eta_t = 1/sqrt(20 + t), alpha_{t+1} = (20 + t)^{1/4}.
    let lr = LrSchedule::InvSqrt {
        learning_rate: 1.0,
        a: 20.0,
        c: 1.0,
    };
    let adp = NoiseShape::Adp {
        power: 1.0,
        lr: lr.clone(),
        base_learning_rate: 1.0,
    };
    close(adp.at(5), 2.236_067_977_499_79); // 25^{1/4}
    close(adp.at(0), 20f64.powf(0.25));
    let half = NoiseShape::Adp {
        power: 0.5,
        lr,
        base_learning_rate: 1.0,
    };
    close(half.at(5), 1.495_348_781_221_220_5); // 25^{1/8}
    // p = 0 is DP-SGD.
    let dp = NoiseShape::Adp {
        power: 0.0,
        lr: LrSchedule::Constant { learning_rate: 0.3 },
        base_learning_rate: 0.3,
    };
    assert_eq!(dp.at(77), 1.0);
}

#[test]
fn adp_adagrad_uses_alpha_t_plus_one() {
    // alpha_{t+1} = (b0^2 + (t+1) C)^{1/4}, b0^2 = 20, C = 1e-4, t = 9.
    let s = NoiseShape::AdpAdagrad {
        b0_sq: 20.0,
        c_alpha: 1e-4,
    };
    close(s.at(9), 2.114_768_960_667_086);
}

#[test]
fn heuristic_decays() {
    close(
        NoiseShape::Exponential { decay: 0.01 }.at(50),
        0.606_530_659_712_633_4,
    );
    let step = NoiseShape::Step {
        factor: 0.6,
        period: 10,
    };
    assert_eq!(step.at(9), 1.0);
    close(step.at(10), 0.6);
    close(step.at(25), 0.36);
    close(
        NoiseShape::TimeDecay { decay: 0.05 }.at(10),
        0.666_666_666_666_666_7,
    );
    let poly = NoiseShape::Polynomial {
        end_ratio: 0.2,
        power: 3.0,
        period: 100,
    };
    close(poly.at(25), 0.5375);
    close(poly.at(0), 1.0);
    close(poly.at(100), 0.2);
    close(poly.at(1000), 0.2);
}

#[test]
fn influence_gd_is_the_closed_form_shape() {
    // s_t = gamma^{(t+1-T)/4}: gamma = 0.9, T = 10, t = 0 gives 0.9^{-9/4}.
    let s = NoiseShape::InfluenceGd {
        gamma: 0.9,
        steps: 10,
    };
    close(s.at(0), 1.267_518_637_136_223_4);
    close(s.at(9), 1.0);
    // sigma_t^2 ratio of consecutive steps is gamma^{1/2} (docs/methods/dynamic_noise.md §1.2(c)).
    close((s.at(4) / s.at(3)).powi(2), 0.9f64.sqrt());
}

#[test]
fn momentum_phase_end_matches_the_paper_examples() {
    // docs/methods/dynamic_noise.md §1.2(e): (0.99, 0.9) -> 230; (0.95, 0.9) -> 45; (0.9, 0.5) -> 7.
    assert_eq!(momentum_phase_end(0.99, 0.9, 100_000), 230);
    assert_eq!(momentum_phase_end(0.95, 0.9, 100_000), 45);
    assert_eq!(momentum_phase_end(0.9, 0.5, 100_000), 7);
}

#[test]
fn influence_momentum_rises_then_falls() {
    // gamma = 0.9, beta = 0.5, T = 20 (T~ = 7); s_t = (q_T / q_{t+1})^{1/4} (mpmath, 30 digits).
    let s = NoiseShape::influence_momentum(0.9, 0.5, 20);
    close(s.at(0), 0.932_150_037_466_110_1);
    close(s.at(6), 1.091_747_125_705_258_4);
    close(s.at(7), 1.264_562_182_548_414_5);
    close(s.at(19), 1.0);
    let v = s.values(20);
    assert!(v[..7].windows(2).all(|w| w[0] < w[1]), "rises in phase 1");
    // After T~ it falls, except at the very last step: q_t has the factor
    // gamma^k - beta^{2k} (k = T + 1 - t), which is smaller at k = 1 (0.65) than at k = 2 (0.7475).
    assert!(v[7..19].windows(2).all(|w| w[0] > w[1]), "falls after T~");
    assert!(v[19] > v[18]);
}

#[test]
fn influence_momentum_is_finite_for_long_runs() {
    let s = NoiseShape::influence_momentum(0.99, 0.9, 40_000);
    assert!(s.check(40_000).is_ok());
}

#[test]
fn values_from_text() {
    assert_eq!(
        parse_values("1.5\n2\n\n# c\n3").unwrap(),
        vec![1.5, 2.0, 3.0]
    );
    assert_eq!(
        parse_values("step,noise_multiplier\n0,1.1\n1,1.2\n").unwrap(),
        vec![1.1, 1.2]
    );
    assert!(matches!(
        parse_values("1\nx\n"),
        Err(ScheduleError::Parse { line: 2, .. })
    ));
    assert!(matches!(
        parse_values("1\n-2\n"),
        Err(ScheduleError::Parse { line: 2, .. })
    ));
    let s = NoiseShape::Values {
        values: vec![1.0, 2.0].into(),
    };
    assert_eq!(s.at(1), 2.0);
    assert_eq!(
        s.check(3),
        Err(ScheduleError::TooShort { len: 2, steps: 3 })
    );
}

#[test]
fn rounding_down_never_increases_sigma() {
    assert_eq!(round_down_significant(1.23456, 3), 1.23);
    assert_eq!(round_down_significant(0.0098765, 2), 0.0098);
    for i in 1..2000 {
        let s = i as f64 * 0.0137 + 0.001;
        let r = round_down_significant(s, 3);
        assert!(r <= s && r > s * (1.0 - 1e-2), "{s} -> {r}");
    }
}

#[test]
fn summary_of_sigmas() {
    let s = ScheduleSummary::of(&[2.0, 1.0, 3.0, 1.5]).unwrap();
    assert_eq!((s.first, s.last, s.min, s.max), (2.0, 1.5, 1.0, 3.0));
    assert!(ScheduleSummary::of(&[]).is_none());
}
