//! Resource quantities. GPUs are counted in integer milli-GPUs everywhere, never in floats,
//! so that fractions pack exactly (0.1 + 0.2 fits in 0.3).

/// Milli-GPUs: 1000 is one whole device.
pub type Milli = u32;

/// Milli-GPUs in one whole GPU.
pub const MILLI_PER_GPU: Milli = 1000;

/// Bytes in a mebibyte. Memory and ephemeral storage are counted in bytes, exact as
/// Kubernetes counts them; traces give them in MiB.
pub const BYTES_PER_MIB: u64 = 1 << 20;

/// The GPUs one pod asks for: whole devices, or a fraction of one shared device.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum GpuRequest {
    /// `n` whole, exclusive devices (0 for a CPU-only pod).
    Whole(u32),
    /// A share of one device, in milli-GPUs, strictly between 0 and 1000.
    Fraction(Milli),
}

impl GpuRequest {
    pub const NONE: GpuRequest = GpuRequest::Whole(0);

    /// Parses a decimal GPU count such as `8`, `0.5` or `0.125` exactly (no float rounding).
    /// A value below one is a fraction; a value of one or more must be whole.
    pub fn parse(text: &str) -> Result<GpuRequest, String> {
        let text = text.trim();
        let (int_part, frac_part) = match text.split_once('.') {
            Some((i, f)) => (i, f),
            None => (text, ""),
        };
        let digits_ok = |s: &str| s.bytes().all(|b| b.is_ascii_digit());
        if int_part.is_empty() && frac_part.is_empty()
            || !digits_ok(int_part)
            || !digits_ok(frac_part)
        {
            return Err(format!("`{text}` is not a non-negative decimal GPU count"));
        }
        let whole: u64 = if int_part.is_empty() {
            0
        } else {
            int_part
                .parse()
                .map_err(|_| format!("`{text}` is too large a GPU count"))?
        };
        let significant = frac_part.trim_end_matches('0');
        if significant.len() > 3 {
            return Err(format!(
                "`{text}` is finer than a milli-GPU (at most 3 decimal places)"
            ));
        }
        let milli_frac: u32 = format!("{significant:0<3}").parse().unwrap_or(0);
        match (whole, milli_frac) {
            (0, 0) => Ok(GpuRequest::Whole(0)),
            (0, m) => Ok(GpuRequest::Fraction(m)),
            (w, 0) => u32::try_from(w)
                .map(GpuRequest::Whole)
                .map_err(|_| format!("`{text}` is too large a GPU count")),
            _ => Err(format!(
                "`{text}`: a request above one GPU must be a whole number of GPUs"
            )),
        }
    }

    /// Milli-GPUs asked for in all.
    #[inline]
    pub fn milli(self) -> u64 {
        match self {
            GpuRequest::Whole(n) => u64::from(n) * u64::from(MILLI_PER_GPU),
            GpuRequest::Fraction(m) => u64::from(m),
        }
    }

    /// Whole devices asked for (0 for a fraction or a CPU-only pod).
    #[inline]
    pub fn whole(self) -> u32 {
        match self {
            GpuRequest::Whole(n) => n,
            GpuRequest::Fraction(_) => 0,
        }
    }

    #[inline]
    pub fn is_none(self) -> bool {
        self == GpuRequest::Whole(0)
    }

    /// How many pods asking this fit on `gpus` GPUs, by GPU count alone (`u64::MAX` for a
    /// pod asking none).
    #[inline]
    pub fn pods_on(self, gpus: u64) -> u64 {
        match self {
            GpuRequest::Whole(0) => u64::MAX,
            GpuRequest::Whole(w) => gpus / u64::from(w),
            GpuRequest::Fraction(milli) => gpus * u64::from(MILLI_PER_GPU / milli),
        }
    }
}

impl std::fmt::Display for GpuRequest {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match *self {
            GpuRequest::Whole(n) => write!(f, "{n}"),
            GpuRequest::Fraction(m) => f.write_str(&thousandths(u64::from(m))),
        }
    }
}

/// Thousandths (milli-GPUs, milliseconds) as an exact decimal count of units ("12.5",
/// "0.004").
pub fn thousandths(milli: u64) -> String {
    let (whole, rest) = (milli / 1000, milli % 1000);
    if rest == 0 {
        whole.to_string()
    } else {
        let digits = format!("{rest:03}");
        format!("{whole}.{}", digits.trim_end_matches('0'))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_exact_decimal_counts() {
        assert_eq!(GpuRequest::parse("8"), Ok(GpuRequest::Whole(8)));
        assert_eq!(GpuRequest::parse("0"), Ok(GpuRequest::Whole(0)));
        assert_eq!(GpuRequest::parse("0.5"), Ok(GpuRequest::Fraction(500)));
        assert_eq!(GpuRequest::parse(".25"), Ok(GpuRequest::Fraction(250)));
        assert_eq!(GpuRequest::parse("0.1"), Ok(GpuRequest::Fraction(100)));
        assert_eq!(GpuRequest::parse("1.0"), Ok(GpuRequest::Whole(1)));
        assert_eq!(GpuRequest::parse("0.4600"), Ok(GpuRequest::Fraction(460)));
    }

    #[test]
    fn rejects_what_is_not_a_gpu_count() {
        for bad in ["", "-1", "1.5", "0.0001", "abc", "1e3", "."] {
            assert!(GpuRequest::parse(bad).is_err(), "{bad} accepted");
        }
    }

    #[test]
    fn displays_as_parsed() {
        for text in ["8", "0.5", "0.125", "0.46"] {
            assert_eq!(GpuRequest::parse(text).unwrap().to_string(), text);
        }
    }
}
