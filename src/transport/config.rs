//! Which transports a job uses, from the environment (set by `onesided run --transport`, by
//! `onesided bench --transport`, or by hand).
//!
//! - `ONESIDED_TRANSPORT`: `auto` (default: shared memory inside a node, the fabric between
//!   nodes) or `fabric` (the fabric for every target, this rank included, so that one machine
//!   runs the network path).
//! - `ONESIDED_FABRIC_PROVIDER`, else `FI_PROVIDER`: the libfabric provider (`tcp`, `shm`,
//!   `verbs`, ...); unset: the first libfabric offers.
//! - `ONESIDED_MR_MODE`: `provider` (default: request every mode onesided honours and follow
//!   what the provider picks) or `verbs` (request only LOCAL|VIRT_ADDR|ALLOCATED|PROV_KEY, the
//!   verbs provider's demands, so that a provider that accepts anything runs the strict paths).
//! - `ONESIDED_FABRIC_ATOMICS`: `auto` (default: element types whose every accumulate
//!   operation the provider runs natively use the NIC's atomics; the others the emulation) or
//!   `software` (every accumulate through the emulation, to test it).

use crate::error::{Error, ErrorClass, Result};

/// `ONESIDED_TRANSPORT`.
pub const ENV_TRANSPORT: &str = "ONESIDED_TRANSPORT";
/// `ONESIDED_FABRIC_PROVIDER`.
pub const ENV_PROVIDER: &str = "ONESIDED_FABRIC_PROVIDER";
/// `ONESIDED_MR_MODE`.
pub const ENV_MR_MODE: &str = "ONESIDED_MR_MODE";
/// `ONESIDED_FABRIC_ATOMICS`.
pub const ENV_ATOMICS: &str = "ONESIDED_FABRIC_ATOMICS";

/// How targets are reached.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Choice {
    /// Shared memory inside a node, the fabric between nodes.
    #[default]
    Auto,
    /// The fabric for every target.
    Fabric,
}

impl Choice {
    /// Parse a `--transport` value or `ONESIDED_TRANSPORT`.
    pub fn parse(s: &str) -> Result<Choice> {
        match s {
            "" | "auto" => Ok(Choice::Auto),
            "fabric" => Ok(Choice::Fabric),
            other => Err(Error::new(
                ErrorClass::Arg,
                format!("transport must be auto or fabric, not {other:?}"),
            )),
        }
    }

    /// The value to put in `ONESIDED_TRANSPORT`.
    pub fn as_str(self) -> &'static str {
        match self {
            Choice::Auto => "auto",
            Choice::Fabric => "fabric",
        }
    }

    /// `ONESIDED_TRANSPORT` of this process.
    pub fn from_env() -> Result<Choice> {
        Choice::parse(&std::env::var(ENV_TRANSPORT).unwrap_or_default())
    }
}

/// The requested memory-registration mode.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum MrRequest {
    /// Whatever the provider picks among the modes onesided honours.
    #[default]
    Provider,
    /// The verbs provider's demands.
    Verbs,
}

/// The fabric settings of this process.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct FabricConfig {
    /// Provider name, if one is asked for.
    pub provider: Option<String>,
    /// Requested MR mode.
    pub mr_mode: MrRequest,
    /// Every accumulate through the software emulation, native atomics or not.
    pub software_atomics: bool,
}

impl FabricConfig {
    /// Read `ONESIDED_FABRIC_PROVIDER` / `FI_PROVIDER` and `ONESIDED_MR_MODE`.
    pub fn from_env() -> Result<FabricConfig> {
        let provider = std::env::var(ENV_PROVIDER)
            .or_else(|_| std::env::var("FI_PROVIDER"))
            .ok()
            .filter(|p| !p.is_empty());
        let mr_mode = match std::env::var(ENV_MR_MODE).unwrap_or_default().as_str() {
            "" | "provider" => MrRequest::Provider,
            "verbs" => MrRequest::Verbs,
            other => {
                return Err(Error::new(
                    ErrorClass::Arg,
                    format!("{ENV_MR_MODE} must be provider or verbs, not {other:?}"),
                ));
            }
        };
        let software_atomics = match std::env::var(ENV_ATOMICS).unwrap_or_default().as_str() {
            "" | "auto" => false,
            "software" => true,
            other => {
                return Err(Error::new(
                    ErrorClass::Arg,
                    format!("{ENV_ATOMICS} must be auto or software, not {other:?}"),
                ));
            }
        };
        Ok(FabricConfig {
            provider,
            mr_mode,
            software_atomics,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn choices_parse_and_print() {
        for c in [Choice::Auto, Choice::Fabric] {
            assert_eq!(Choice::parse(c.as_str()).unwrap(), c);
        }
        assert_eq!(Choice::parse("").unwrap(), Choice::Auto);
        assert_eq!(Choice::parse("ucx").unwrap_err().class(), ErrorClass::Arg);
    }
}
