//! [`OpName`]: an op's name in 16 bytes.
//!
//! Every op record carries its name, and the record crosses between cores with every op (in the
//! ready queue and in the graph's op slot), a cache line at a time. A `Cow<'static, str>` takes 24
//! bytes; this enum takes 16 (the static variant's pointer is never null, which leaves room for
//! the tag), which helps bring the record to 56 bytes and a parked op's slot to 112. Names are
//! almost always string literals; an owned name is boxed once when the op (or operator) is
//! built, and shared, not copied, by every push of an operator.

use std::borrow::Cow;
use std::fmt;
use std::sync::Arc;

/// An op's name: a literal, or an owned string shared by reference count.
#[derive(Clone)]
pub(crate) enum OpName {
    Static(&'static str),
    Shared(Arc<String>),
}

impl OpName {
    pub(crate) fn as_str(&self) -> &str {
        match self {
            OpName::Static(name) => name,
            OpName::Shared(name) => name,
        }
    }

    /// The name as the `Cow` the public API hands out (copies an owned name).
    pub(crate) fn to_cow(&self) -> Cow<'static, str> {
        match self {
            OpName::Static(name) => Cow::Borrowed(name),
            OpName::Shared(name) => Cow::Owned(String::clone(name)),
        }
    }
}

impl From<Cow<'static, str>> for OpName {
    /// Inlined into `Engine::op` and its kin, where the name is most often a literal: a push
    /// then stores the literal without looking at a `Cow` (`docs/decisions.md`, "Inlining the
    /// worker path").
    #[inline]
    fn from(name: Cow<'static, str>) -> Self {
        match name {
            Cow::Borrowed(name) => OpName::Static(name),
            Cow::Owned(name) => OpName::Shared(Arc::new(name)),
        }
    }
}

impl fmt::Debug for OpName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(self.as_str(), f)
    }
}

impl fmt::Display for OpName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sixteen_bytes_and_round_trips() {
        assert_eq!(size_of::<OpName>(), 16);
        let literal = OpName::from(Cow::Borrowed("copy"));
        assert!(matches!(literal, OpName::Static("copy")));
        assert_eq!(literal.to_cow(), "copy");
        let owned = OpName::from(Cow::Owned(format!("layer{}", 3)));
        assert_eq!(owned.clone().as_str(), "layer3");
        assert_eq!(owned.to_string(), "layer3");
        assert_eq!(format!("{owned:?}"), "\"layer3\"");
    }
}
