//! The size expressions of a pass's `WIDTH` and `HEIGHT` (`"floor($WIDTH/4.0)"`,
//! `"max(8.0, floor($WIDTH*$quality))"`): parsed once when the header is read, evaluated once per
//! frame by whoever sizes the pass's buffer.
//!
//! The grammar is the part of DDMathParser (the ISF editor's evaluator) that ISF files use:
//! numbers, `+ - * / %`, `^` or `**` for powers, unary minus, parentheses, the variables
//! `$WIDTH`, `$HEIGHT` and `$NAME` for a number-valued input (the `$` may be left out, as
//! VVISF allows), the constant `pi`, and the functions `min`, `max` (one or more arguments),
//! `floor`, `ceil`, `round`, `trunc`, `abs`, `sign`, `sqrt`, `exp`, `log`, `log2`, `log10`,
//! `sin`, `cos`, `tan`, `pow`, `mod`, `clamp`. Expressions are at most [`MAX_EXPR_LEN`] bytes
//! and nested at most [`MAX_EXPR_DEPTH`] deep, so that evaluation never recurses without bound.

use crate::error::{quote, Error, Result};

/// The longest expression read, in bytes.
pub const MAX_EXPR_LEN: usize = 1024;
/// The deepest nesting of parentheses, calls and operators.
pub const MAX_EXPR_DEPTH: usize = 64;

/// A parsed expression, with its text as written.
#[derive(Debug, Clone, PartialEq)]
pub struct Expr {
    text: String,
    root: Node,
}

#[derive(Debug, Clone, PartialEq)]
enum Node {
    Num(f64),
    Var(String),
    Neg(Box<Node>),
    Bin(Op, Box<Node>, Box<Node>),
    Call(Func, Vec<Node>),
}

#[derive(Debug, Clone, Copy, PartialEq)]
enum Op {
    Add,
    Sub,
    Mul,
    Div,
    Rem,
    Pow,
}

/// A function: its name, arity (`None`: one or more) and body.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Func {
    Min,
    Max,
    /// An index into [`UNARY`].
    Unary(usize),
    Pow,
    Mod,
    Clamp,
}

/// A function of one number.
type Unary = fn(f64) -> f64;

const UNARY: &[(&str, Unary)] = &[
    ("floor", f64::floor),
    ("ceil", f64::ceil),
    ("round", f64::round),
    ("trunc", f64::trunc),
    ("abs", f64::abs),
    ("sign", f64::signum),
    ("sqrt", f64::sqrt),
    ("exp", f64::exp),
    ("log", f64::ln),
    ("ln", f64::ln),
    ("log2", f64::log2),
    ("log10", f64::log10),
    ("sin", f64::sin),
    ("cos", f64::cos),
    ("tan", f64::tan),
];

impl Func {
    fn by_name(name: &str) -> Option<Func> {
        Some(match name {
            "min" => Func::Min,
            "max" => Func::Max,
            "pow" => Func::Pow,
            "mod" => Func::Mod,
            "clamp" => Func::Clamp,
            _ => Func::Unary(UNARY.iter().position(|(n, _)| *n == name)?),
        })
    }

    fn arity_ok(self, n: usize) -> Option<&'static str> {
        let (ok, want) = match self {
            Func::Min | Func::Max => (n >= 1, "one or more arguments"),
            Func::Unary(_) => (n == 1, "one argument"),
            Func::Pow | Func::Mod => (n == 2, "two arguments"),
            Func::Clamp => (n == 3, "three arguments"),
        };
        (!ok).then_some(want)
    }
}

impl Expr {
    /// Parses `text`; an error names the position and what was expected there.
    pub fn parse(text: &str) -> Result<Expr> {
        let err = |message: String| Error::Expr {
            at: "expression".into(),
            expr: quote(text),
            message,
        };
        if text.len() > MAX_EXPR_LEN {
            return Err(err(format!(
                "{} bytes long; at most {MAX_EXPR_LEN} are read",
                text.len()
            )));
        }
        let mut p = Parser {
            s: text.as_bytes(),
            i: 0,
            depth: 0,
        };
        let root = p.expr().map_err(&err)?;
        p.blanks();
        if p.i < p.s.len() {
            return Err(err(format!(
                "unexpected {} at character {}",
                quote(&text[p.i..]),
                p.i + 1
            )));
        }
        Ok(Expr {
            text: text.to_string(),
            root,
        })
    }

    /// A constant expression (a `WIDTH` written as a JSON number).
    pub fn constant(v: f64) -> Expr {
        Expr {
            text: v.to_string(),
            root: Node::Num(v),
        }
    }

    /// The text as written in the header.
    pub fn text(&self) -> &str {
        &self.text
    }

    /// The variables it reads, without `$`, in order of first use.
    pub fn variables(&self) -> Vec<&str> {
        fn walk<'a>(n: &'a Node, out: &mut Vec<&'a str>) {
            match n {
                Node::Num(_) => {}
                Node::Var(v) => {
                    if !out.contains(&v.as_str()) {
                        out.push(v);
                    }
                }
                Node::Neg(a) => walk(a, out),
                Node::Bin(_, a, b) => {
                    walk(a, out);
                    walk(b, out);
                }
                Node::Call(_, args) => args.iter().for_each(|a| walk(a, out)),
            }
        }
        let mut out = Vec::new();
        walk(&self.root, &mut out);
        out
    }

    /// Its value, with each variable (named without `$`) looked up in `vars`; an unknown one
    /// reads as 0 (a header's expressions are checked against its inputs when it is parsed).
    /// Division by zero and the like give IEEE results (infinity, NaN), never a panic.
    pub fn eval(&self, vars: &dyn Fn(&str) -> Option<f64>) -> f64 {
        eval(&self.root, vars)
    }
}

fn eval(n: &Node, vars: &dyn Fn(&str) -> Option<f64>) -> f64 {
    match n {
        Node::Num(v) => *v,
        Node::Var(name) => vars(name).unwrap_or(0.0),
        Node::Neg(a) => -eval(a, vars),
        Node::Bin(op, a, b) => {
            let (a, b) = (eval(a, vars), eval(b, vars));
            match op {
                Op::Add => a + b,
                Op::Sub => a - b,
                Op::Mul => a * b,
                Op::Div => a / b,
                Op::Rem => a % b,
                Op::Pow => a.powf(b),
            }
        }
        Node::Call(f, args) => {
            let mut vals = args.iter().map(|a| eval(a, vars));
            match f {
                Func::Min => vals.fold(f64::INFINITY, f64::min),
                Func::Max => vals.fold(f64::NEG_INFINITY, f64::max),
                Func::Unary(k) => (UNARY[*k].1)(vals.next().unwrap_or(0.0)),
                Func::Pow | Func::Mod | Func::Clamp => {
                    let a = vals.next().unwrap_or(0.0);
                    let b = vals.next().unwrap_or(0.0);
                    match f {
                        Func::Pow => a.powf(b),
                        Func::Mod => a - b * (a / b).floor(),
                        _ => a.max(b).min(vals.next().unwrap_or(0.0)),
                    }
                }
            }
        }
    }
}

struct Parser<'a> {
    s: &'a [u8],
    i: usize,
    depth: usize,
}

type PResult<T> = std::result::Result<T, String>;

impl Parser<'_> {
    fn blanks(&mut self) {
        while self.i < self.s.len() && self.s[self.i].is_ascii_whitespace() {
            self.i += 1;
        }
    }

    fn peek(&mut self) -> Option<u8> {
        self.blanks();
        self.s.get(self.i).copied()
    }

    fn enter(&mut self) -> PResult<()> {
        self.depth += 1;
        if self.depth > MAX_EXPR_DEPTH {
            return Err(format!("nested more than {MAX_EXPR_DEPTH} deep"));
        }
        Ok(())
    }

    fn expr(&mut self) -> PResult<Node> {
        self.enter()?;
        let mut left = self.term()?;
        while let Some(c @ (b'+' | b'-')) = self.peek() {
            self.i += 1;
            let right = self.term()?;
            let op = if c == b'+' { Op::Add } else { Op::Sub };
            left = Node::Bin(op, Box::new(left), Box::new(right));
        }
        self.depth -= 1;
        Ok(left)
    }

    fn term(&mut self) -> PResult<Node> {
        let mut left = self.unary()?;
        loop {
            let op = match self.peek() {
                Some(b'*') if self.s.get(self.i + 1) != Some(&b'*') => Op::Mul,
                Some(b'/') => Op::Div,
                Some(b'%') => Op::Rem,
                _ => break,
            };
            self.i += 1;
            let right = self.unary()?;
            left = Node::Bin(op, Box::new(left), Box::new(right));
        }
        Ok(left)
    }

    fn unary(&mut self) -> PResult<Node> {
        self.enter()?;
        let n = match self.peek() {
            Some(b'-') => {
                self.i += 1;
                Node::Neg(Box::new(self.unary()?))
            }
            Some(b'+') => {
                self.i += 1;
                self.unary()?
            }
            _ => self.power()?,
        };
        self.depth -= 1;
        Ok(n)
    }

    fn power(&mut self) -> PResult<Node> {
        let base = self.atom()?;
        let pow = match self.peek() {
            Some(b'^') => 1,
            Some(b'*') if self.s.get(self.i + 1) == Some(&b'*') => 2,
            _ => return Ok(base),
        };
        self.i += pow;
        // Right-associative, and binds tighter than unary minus on its left only.
        let exp = self.unary()?;
        Ok(Node::Bin(Op::Pow, Box::new(base), Box::new(exp)))
    }

    fn atom(&mut self) -> PResult<Node> {
        let next = self.peek();
        let at = self.i + 1;
        match next {
            Some(b'(') => {
                self.i += 1;
                let e = self.expr()?;
                self.close(b')')?;
                Ok(e)
            }
            Some(c) if c.is_ascii_digit() || c == b'.' => self.number(),
            Some(c) if c == b'$' || c.is_ascii_alphabetic() || c == b'_' => {
                let dollar = c == b'$';
                if dollar {
                    self.i += 1;
                }
                let start = self.i;
                while self.i < self.s.len()
                    && (self.s[self.i].is_ascii_alphanumeric() || self.s[self.i] == b'_')
                {
                    self.i += 1;
                }
                let name = String::from_utf8_lossy(&self.s[start..self.i]).into_owned();
                if name.is_empty() {
                    return Err(format!("'$' at character {at} is not followed by a name"));
                }
                if !dollar && self.peek() == Some(b'(') {
                    return self.call(&name, at);
                }
                if !dollar && name.eq_ignore_ascii_case("pi") {
                    return Ok(Node::Num(std::f64::consts::PI));
                }
                Ok(Node::Var(name))
            }
            Some(_) => Err(format!(
                "expected a number, a name or '(' at character {at}, found {}",
                quote(&String::from_utf8_lossy(&self.s[self.i..]))
            )),
            None => Err("ends where a number, a name or '(' was expected".into()),
        }
    }

    fn call(&mut self, name: &str, at: usize) -> PResult<Node> {
        let f = Func::by_name(name).ok_or_else(|| {
            format!(
                "unknown function {} at character {at}; known: min, max, floor, ceil, round, trunc, abs, sign, sqrt, exp, log, log2, log10, sin, cos, tan, pow, mod, clamp",
                quote(name)
            )
        })?;
        self.i += 1; // '('
        let mut args = Vec::new();
        if self.peek() == Some(b')') {
            self.i += 1;
        } else {
            loop {
                args.push(self.expr()?);
                match self.peek() {
                    Some(b',') => self.i += 1,
                    _ => {
                        self.close(b')')?;
                        break;
                    }
                }
            }
        }
        if let Some(want) = f.arity_ok(args.len()) {
            return Err(format!(
                "{name}() at character {at} takes {want}, found {}",
                args.len()
            ));
        }
        Ok(Node::Call(f, args))
    }

    fn close(&mut self, c: u8) -> PResult<()> {
        if self.peek() == Some(c) {
            self.i += 1;
            Ok(())
        } else {
            Err(format!(
                "expected '{}' at character {}",
                c as char,
                self.i + 1
            ))
        }
    }

    fn number(&mut self) -> PResult<Node> {
        let start = self.i;
        let digits = |p: &mut Self| {
            while p.i < p.s.len() && p.s[p.i].is_ascii_digit() {
                p.i += 1;
            }
        };
        digits(self);
        if self.s.get(self.i) == Some(&b'.') {
            self.i += 1;
            digits(self);
        }
        if matches!(self.s.get(self.i), Some(b'e' | b'E'))
            && self
                .s
                .get(self.i + 1)
                .is_some_and(|c| c.is_ascii_digit() || *c == b'-' || *c == b'+')
        {
            self.i += 2;
            digits(self);
        }
        let text = std::str::from_utf8(&self.s[start..self.i]).unwrap_or("");
        text.parse::<f64>().map(Node::Num).map_err(|_| {
            format!(
                "malformed number {} at character {}",
                quote(text),
                start + 1
            )
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ev(text: &str) -> f64 {
        Expr::parse(text).unwrap().eval(&|v| match v {
            "WIDTH" => Some(1920.0),
            "HEIGHT" => Some(1080.0),
            "q" => Some(0.5),
            _ => None,
        })
    }

    #[test]
    fn the_expressions_of_real_isf_files_evaluate() {
        assert_eq!(ev("floor($WIDTH/4.0)"), 480.0);
        assert_eq!(ev("$WIDTH / 3.0"), 640.0);
        assert_eq!(ev("max(8.0,floor($WIDTH*$q))"), 960.0);
        assert_eq!(ev("floor($WIDTH*min((0.8),1.0))"), 1536.0);
        assert_eq!(ev("max($WIDTH/486.0,1.0)"), 1920.0 / 486.0);
        assert_eq!(ev("1"), 1.0);
        assert_eq!(ev("WIDTH/2"), 960.0);
    }

    #[test]
    fn operators_keep_their_precedence() {
        assert_eq!(ev("1 + 2 * 3"), 7.0);
        assert_eq!(ev("(1 + 2) * 3"), 9.0);
        assert_eq!(ev("2 ^ 3 ^ 2"), 512.0);
        assert_eq!(ev("2 ** 3"), 8.0);
        assert_eq!(ev("-2 ^ 2"), -4.0);
        assert_eq!(ev("7 % 4 - -1"), 4.0);
        assert_eq!(ev("pow(2, 10) + clamp(5, 0, 1) + mod(-1, 4)"), 1028.0);
        assert_eq!(ev("1e3 + .5"), 1000.5);
    }

    #[test]
    fn malformed_expressions_name_the_position() {
        for (text, want) in [
            ("$WIDTH/", "ends where a number"),
            ("floor($WIDTH", "expected ')' at character 13"),
            ("blur(2)", "unknown function \"blur\""),
            (
                "pow(2)",
                "pow() at character 1 takes two arguments, found 1",
            ),
            ("2 3", "unexpected \"3\" at character 3"),
            ("$", "'$' at character 1 is not followed by a name"),
            ("#", "expected a number, a name or '(' at character 1"),
        ] {
            let e = Expr::parse(text).unwrap_err().to_string();
            assert!(e.contains(want), "{text}: {e}");
        }
        let deep = format!("{}1{}", "(".repeat(100), ")".repeat(100));
        assert!(Expr::parse(&deep)
            .unwrap_err()
            .to_string()
            .contains("nested"));
        let deep = "-".repeat(10_000) + "1";
        assert!(Expr::parse(&deep).is_err());
    }
}
