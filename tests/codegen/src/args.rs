//! Command-line flags of the bench binaries: `--flag value`, parsed with errors naming the flag.

use std::fmt::Display;
use std::str::FromStr;

/// The value after flag `name`, parsed: for `--n 10`, `value::<usize>(&mut args, "--n")`.
pub fn value<T>(args: &mut impl Iterator<Item = String>, name: &str) -> Result<T, String>
where
    T: FromStr,
    T::Err: Display,
{
    let raw = args.next().ok_or_else(|| format!("{name} needs a value"))?;
    raw.parse().map_err(|e| format!("{name} {raw}: {e}"))
}

/// The value after flag `name`, one of `choices`.
pub fn choice(
    args: &mut impl Iterator<Item = String>,
    name: &str,
    choices: &[&'static str],
) -> Result<&'static str, String> {
    let raw: String = value(args, name)?;
    choices.iter().copied().find(|c| *c == raw).ok_or_else(|| format!("{name} {raw}: expected one of {choices:?}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_and_choices_name_the_flag() {
        let mut args = ["10", "x", "http", "ftp"].map(String::from).into_iter();
        assert_eq!(value::<usize>(&mut args, "--n"), Ok(10));
        assert_eq!(value::<usize>(&mut args, "--n"), Err("--n x: invalid digit found in string".into()));
        assert_eq!(choice(&mut args, "--driver", &["inproc", "http"]), Ok("http"));
        assert_eq!(
            choice(&mut args, "--driver", &["inproc", "http"]),
            Err(r#"--driver ftp: expected one of ["inproc", "http"]"#.into())
        );
        assert_eq!(value::<f64>(&mut args, "--seconds"), Err("--seconds needs a value".into()));
    }
}
