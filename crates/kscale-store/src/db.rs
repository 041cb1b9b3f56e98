//! One SQL interface over both backends, SQLite and PostgreSQL
//! (docs/store.md), so a store method is written once.
//!
//! How to write a store method that works on both:
//!
//! - Placeholders are `$1, $2 …`. PostgreSQL reads them natively; for SQLite
//!   [`sqlite_sql`] rewrites them to `?1, ?2 …` (explicit numbers), so the
//!   order in which they appear does not matter here. Raw rusqlite would read
//!   `$1` as a *named* parameter and bind positionally in order of first
//!   appearance — number them in that order anyway, so the SQL also runs
//!   through a bare `rusqlite::Connection`.
//! - Parameters are `&[&dyn ToValue]`: `&[&run_id, &label, &None::<i64>]`.
//!   Integers, floats, booleans (stored as 0/1 on both backends), strings and
//!   `Option`s of them.
//! - Rows come back as [`Row`]s: `r.get::<i64>(0)?`, `r.get::<Option<String>>(3)?`.
//! - Portable SQL only: `INSERT … RETURNING id` through
//!   [`Db::insert_returning_id`] (no `last_insert_rowid`), `ON CONFLICT (…) DO
//!   UPDATE SET c = excluded.c` (no `INSERT OR REPLACE`), `"user"` for column
//!   names PostgreSQL reserves, no `sum()` (PostgreSQL answers `numeric`).
//!   `rowid` works on both: SQLite has it on every table and the PostgreSQL
//!   migrations add it as an identity column ([`crate::schema::pg_ddl`]), so
//!   `ORDER BY rowid` is insertion order on both.
//! - Several statements that must land together go in
//!   [`Db::transaction`].
//!
//! Porting a method written on `self.conn` (rusqlite) is mechanical:
//!
//! | rusqlite | here |
//! |---|---|
//! | `self.conn.execute(sql, params![a, b])` | `self.db.execute(sql, &[&a, &b])` |
//! | `self.conn.query_row(sql, params![…], \|r\| r.get(0))` | `self.db.query_one(sql, &[…], \|r\| r.get(0))` |
//! | `… .optional()?` | `self.db.query_opt(…)?` |
//! | `prepare` + `query_map` + `collect` | `self.db.query_rows(sql, &[…], \|r\| Ok(…))` |
//! | `INSERT …` + `last_insert_rowid()` | `self.db.insert_returning_id("INSERT … RETURNING id", …)` |
//! | `r.get::<_, T>(i)` | `r.get::<T>(i)` |
//! | `unchecked_transaction()` … `commit()` | `self.db.transaction(\|db\| { …; Ok(x) })` |
//! | closures returning `rusqlite::Result` | [`crate::Result`] (`?` takes JSON errors too) |
//!
//! Every store test runs against both backends (tests.rs), so a non-portable
//! statement fails a test rather than a user.

use crate::{Result, StoreError};
#[cfg(feature = "postgres")]
use std::cell::RefCell;

/// A value bound to, or read from, a statement.
#[derive(Clone, Debug, PartialEq)]
pub enum Value {
    Null,
    Int(i64),
    Real(f64),
    Text(String),
}

/// What can be bound as a statement parameter.
pub trait ToValue {
    fn to_value(&self) -> Value;
}

impl ToValue for i64 {
    fn to_value(&self) -> Value {
        Value::Int(*self)
    }
}
impl ToValue for i32 {
    fn to_value(&self) -> Value {
        Value::Int(i64::from(*self))
    }
}
impl ToValue for u32 {
    fn to_value(&self) -> Value {
        Value::Int(i64::from(*self))
    }
}
impl ToValue for bool {
    fn to_value(&self) -> Value {
        Value::Int(i64::from(*self))
    }
}
impl ToValue for f64 {
    fn to_value(&self) -> Value {
        Value::Real(*self)
    }
}
impl ToValue for str {
    fn to_value(&self) -> Value {
        Value::Text(self.to_string())
    }
}
impl ToValue for String {
    fn to_value(&self) -> Value {
        Value::Text(self.clone())
    }
}
impl<T: ToValue + ?Sized> ToValue for &T {
    fn to_value(&self) -> Value {
        (**self).to_value()
    }
}
impl<T: ToValue> ToValue for Option<T> {
    fn to_value(&self) -> Value {
        match self {
            Some(v) => v.to_value(),
            None => Value::Null,
        }
    }
}
impl ToValue for Value {
    fn to_value(&self) -> Value {
        self.clone()
    }
}

/// What a column can be read as.
pub trait FromValue: Sized {
    fn from_value(v: &Value) -> std::result::Result<Self, String>;
}

impl FromValue for i64 {
    fn from_value(v: &Value) -> std::result::Result<Self, String> {
        match v {
            Value::Int(i) => Ok(*i),
            other => Err(format!("expected an integer, found {other:?}")),
        }
    }
}
impl FromValue for f64 {
    fn from_value(v: &Value) -> std::result::Result<Self, String> {
        match v {
            Value::Real(f) => Ok(*f),
            Value::Int(i) => Ok(*i as f64),
            other => Err(format!("expected a number, found {other:?}")),
        }
    }
}
impl FromValue for bool {
    fn from_value(v: &Value) -> std::result::Result<Self, String> {
        match v {
            Value::Int(i) => Ok(*i != 0),
            other => Err(format!("expected 0 or 1, found {other:?}")),
        }
    }
}
impl FromValue for String {
    fn from_value(v: &Value) -> std::result::Result<Self, String> {
        match v {
            Value::Text(s) => Ok(s.clone()),
            other => Err(format!("expected text, found {other:?}")),
        }
    }
}
impl<T: FromValue> FromValue for Option<T> {
    fn from_value(v: &Value) -> std::result::Result<Self, String> {
        match v {
            Value::Null => Ok(None),
            v => T::from_value(v).map(Some),
        }
    }
}

/// One result row, read out of the backend's cursor.
#[derive(Clone, Debug)]
pub struct Row(Vec<Value>);

impl Row {
    pub fn get<T: FromValue>(&self, i: usize) -> Result<T> {
        let v = self
            .0
            .get(i)
            .ok_or_else(|| StoreError::Type(format!("no column {i}")))?;
        T::from_value(v).map_err(|e| StoreError::Type(format!("column {i}: {e}")))
    }
}

/// Which server a store talks to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Backend {
    Sqlite,
    Postgres,
}

pub(crate) enum Db {
    Sqlite(rusqlite::Connection),
    /// `postgres::Client` wants `&mut`; the store's methods take `&self`
    /// like rusqlite's, and a store is used from one thread.
    #[cfg(feature = "postgres")]
    Pg(RefCell<postgres::Client>),
}

impl Db {
    pub fn backend(&self) -> Backend {
        match self {
            Db::Sqlite(_) => Backend::Sqlite,
            #[cfg(feature = "postgres")]
            Db::Pg(_) => Backend::Postgres,
        }
    }

    /// Runs one statement; the number of rows it changed.
    pub fn execute(&self, sql: &str, params: &[&dyn ToValue]) -> Result<u64> {
        let vals: Vec<Value> = params.iter().map(|p| p.to_value()).collect();
        match self {
            Db::Sqlite(c) => {
                let mut st = c.prepare_cached(&sqlite_sql(sql))?;
                Ok(st.execute(rusqlite::params_from_iter(vals.iter()))? as u64)
            }
            #[cfg(feature = "postgres")]
            Db::Pg(c) => {
                let refs = pg_refs(&vals);
                Ok(c.borrow_mut().execute(sql, &refs)?)
            }
        }
    }

    /// Every row of a query.
    pub fn query(&self, sql: &str, params: &[&dyn ToValue]) -> Result<Vec<Row>> {
        let vals: Vec<Value> = params.iter().map(|p| p.to_value()).collect();
        match self {
            Db::Sqlite(c) => {
                let mut st = c.prepare_cached(&sqlite_sql(sql))?;
                let n = st.column_count();
                let mut rows = st.query(rusqlite::params_from_iter(vals.iter()))?;
                let mut out = Vec::new();
                while let Some(r) = rows.next()? {
                    let mut row = Vec::with_capacity(n);
                    for i in 0..n {
                        row.push(match r.get_ref(i)? {
                            rusqlite::types::ValueRef::Null => Value::Null,
                            rusqlite::types::ValueRef::Integer(i) => Value::Int(i),
                            rusqlite::types::ValueRef::Real(f) => Value::Real(f),
                            rusqlite::types::ValueRef::Text(t) => {
                                Value::Text(String::from_utf8_lossy(t).into_owned())
                            }
                            rusqlite::types::ValueRef::Blob(_) => {
                                return Err(StoreError::Type(format!(
                                    "column {i} is a blob; the store keeps text"
                                )))
                            }
                        });
                    }
                    out.push(Row(row));
                }
                Ok(out)
            }
            #[cfg(feature = "postgres")]
            Db::Pg(c) => {
                let refs = pg_refs(&vals);
                let rows = c.borrow_mut().query(sql, &refs)?;
                rows.iter().map(pg_row).collect()
            }
        }
    }

    /// Every row of a query, each turned into a `T` by `f`.
    pub fn query_rows<T>(
        &self,
        sql: &str,
        params: &[&dyn ToValue],
        f: impl FnMut(&Row) -> Result<T>,
    ) -> Result<Vec<T>> {
        self.query(sql, params)?.iter().map(f).collect()
    }

    /// The first row, if any.
    pub fn query_opt<T>(
        &self,
        sql: &str,
        params: &[&dyn ToValue],
        f: impl FnOnce(&Row) -> Result<T>,
    ) -> Result<Option<T>> {
        self.query(sql, params)?.first().map(f).transpose()
    }

    /// The first row; a query that returns none is an error.
    pub fn query_one<T>(
        &self,
        sql: &str,
        params: &[&dyn ToValue],
        f: impl FnOnce(&Row) -> Result<T>,
    ) -> Result<T> {
        self.query_opt(sql, params, f)?
            .ok_or_else(|| StoreError::Type(format!("no row from `{}`", first_line(sql))))
    }

    /// `INSERT … RETURNING id`: the new row's id.
    pub fn insert_returning_id(&self, sql: &str, params: &[&dyn ToValue]) -> Result<i64> {
        self.query_one(sql, params, |r| r.get(0))
    }

    /// Several statements without parameters (migrations).
    pub fn batch(&self, sql: &str) -> Result<()> {
        match self {
            Db::Sqlite(c) => Ok(c.execute_batch(sql)?),
            #[cfg(feature = "postgres")]
            Db::Pg(c) => Ok(c.borrow_mut().batch_execute(sql)?),
        }
    }

    /// Runs `f` in one transaction: committed if it returns `Ok`, rolled
    /// back otherwise. SQLite's is `IMMEDIATE` — it takes the write lock at
    /// once, so two writers wait for each other (busy_timeout) instead of
    /// failing on a lock upgrade.
    pub fn transaction<T>(&self, f: impl FnOnce(&Db) -> Result<T>) -> Result<T> {
        self.batch(match self.backend() {
            Backend::Sqlite => "BEGIN IMMEDIATE",
            Backend::Postgres => "BEGIN",
        })?;
        match f(self) {
            Ok(v) => {
                self.batch("COMMIT")?;
                Ok(v)
            }
            Err(e) => {
                let _ = self.batch("ROLLBACK");
                Err(e)
            }
        }
    }
}

fn first_line(sql: &str) -> &str {
    sql.trim().lines().next().unwrap_or("")
}

/// `$N` → `?N` outside string literals and quoted identifiers: SQLite's
/// explicitly numbered parameters, bound by number whatever their order.
pub(crate) fn sqlite_sql(sql: &str) -> String {
    let mut out = String::with_capacity(sql.len());
    let mut chars = sql.chars().peekable();
    let mut quote: Option<char> = None;
    while let Some(c) = chars.next() {
        match quote {
            Some(q) => {
                if c == q {
                    quote = None;
                }
                out.push(c);
            }
            None => {
                if c == '\'' || c == '"' {
                    quote = Some(c);
                    out.push(c);
                } else if c == '$' && chars.peek().is_some_and(|d| d.is_ascii_digit()) {
                    out.push('?');
                } else {
                    out.push(c);
                }
            }
        }
    }
    out
}

impl rusqlite::ToSql for Value {
    fn to_sql(&self) -> rusqlite::Result<rusqlite::types::ToSqlOutput<'_>> {
        use rusqlite::types::{ToSqlOutput, ValueRef};
        Ok(match self {
            Value::Null => ToSqlOutput::Borrowed(ValueRef::Null),
            Value::Int(i) => ToSqlOutput::Borrowed(ValueRef::Integer(*i)),
            Value::Real(f) => ToSqlOutput::Borrowed(ValueRef::Real(*f)),
            Value::Text(s) => ToSqlOutput::Borrowed(ValueRef::Text(s.as_bytes())),
        })
    }
}

#[cfg(feature = "postgres")]
fn pg_refs(vals: &[Value]) -> Vec<&(dyn postgres::types::ToSql + Sync)> {
    vals.iter()
        .map(|v| v as &(dyn postgres::types::ToSql + Sync))
        .collect()
}

/// PostgreSQL types its parameters from the statement; a [`Value`] is
/// converted to whatever the server inferred (an integer bound where a
/// float is expected, text where the server says text…).
#[cfg(feature = "postgres")]
impl postgres::types::ToSql for Value {
    fn to_sql(
        &self,
        ty: &postgres::types::Type,
        out: &mut postgres::types::private::BytesMut,
    ) -> std::result::Result<postgres::types::IsNull, Box<dyn std::error::Error + Sync + Send>>
    {
        use postgres::types::{IsNull, Type};
        let text = matches!(*ty, Type::TEXT | Type::VARCHAR | Type::BPCHAR | Type::NAME);
        match self {
            Value::Null => Ok(IsNull::Yes),
            Value::Int(i) => match *ty {
                Type::INT8 => i.to_sql(ty, out),
                Type::INT4 => i32::try_from(*i)?.to_sql(ty, out),
                Type::INT2 => i16::try_from(*i)?.to_sql(ty, out),
                Type::FLOAT8 => (*i as f64).to_sql(ty, out),
                Type::FLOAT4 => (*i as f32).to_sql(ty, out),
                Type::BOOL => (*i != 0).to_sql(ty, out),
                _ if text => i.to_string().to_sql(ty, out),
                _ => Err(format!("cannot bind an integer as {ty}").into()),
            },
            Value::Real(f) => match *ty {
                Type::FLOAT8 => f.to_sql(ty, out),
                Type::FLOAT4 => (*f as f32).to_sql(ty, out),
                _ if text => f.to_string().to_sql(ty, out),
                _ => Err(format!("cannot bind a float as {ty}").into()),
            },
            Value::Text(s) if text => s.as_str().to_sql(ty, out),
            Value::Text(_) => Err(format!("cannot bind text as {ty}").into()),
        }
    }

    fn accepts(_: &postgres::types::Type) -> bool {
        true
    }

    postgres::types::to_sql_checked!();
}

#[cfg(feature = "postgres")]
fn pg_row(r: &postgres::Row) -> Result<Row> {
    use postgres::types::Type;
    let mut out = Vec::with_capacity(r.len());
    for (i, col) in r.columns().iter().enumerate() {
        let ty = col.type_();
        let v = match *ty {
            Type::INT8 => r.try_get::<_, Option<i64>>(i)?.map(Value::Int),
            Type::INT4 => r
                .try_get::<_, Option<i32>>(i)?
                .map(|x| Value::Int(x.into())),
            Type::INT2 => r
                .try_get::<_, Option<i16>>(i)?
                .map(|x| Value::Int(x.into())),
            Type::BOOL => r
                .try_get::<_, Option<bool>>(i)?
                .map(|x| Value::Int(x.into())),
            Type::FLOAT8 => r.try_get::<_, Option<f64>>(i)?.map(Value::Real),
            Type::FLOAT4 => r
                .try_get::<_, Option<f32>>(i)?
                .map(|x| Value::Real(x.into())),
            Type::TEXT | Type::VARCHAR | Type::BPCHAR | Type::NAME => {
                r.try_get::<_, Option<String>>(i)?.map(Value::Text)
            }
            _ => {
                return Err(StoreError::Type(format!(
                    "column {i} ({}) has type {ty}, which the store does not read",
                    col.name()
                )))
            }
        };
        out.push(v.unwrap_or(Value::Null));
    }
    Ok(Row(out))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dollar_placeholders_become_numbered_question_marks() {
        assert_eq!(
            sqlite_sql("UPDATE t SET a = $2, b = '$1', \"$3\" = $10 WHERE id = $1"),
            "UPDATE t SET a = ?2, b = '$1', \"$3\" = ?10 WHERE id = ?1"
        );
    }

    /// What raw rusqlite does with `$N` (the SQL other modules may run
    /// through a bare connection): named parameters, bound positionally in
    /// order of first appearance — right only when numbered in that order.
    #[test]
    fn raw_rusqlite_binds_dollar_names_by_first_appearance() {
        let c = rusqlite::Connection::open_in_memory().unwrap();
        let v: (i64, i64) = c
            .query_row("SELECT $1, $2 + $1", rusqlite::params![10, 5], |r| {
                Ok((r.get(0)?, r.get(1)?))
            })
            .unwrap();
        assert_eq!(v, (10, 15));
        let swapped: (i64, i64) = c
            .query_row("SELECT $2, $1", rusqlite::params![10, 5], |r| {
                Ok((r.get(0)?, r.get(1)?))
            })
            .unwrap();
        assert_eq!(swapped, (10, 5), "$2 is bound first: it appears first");
        let db = Db::Sqlite(c);
        let v = db
            .query_one("SELECT $2, $1", &[&10i64, &5i64], |r| {
                Ok((r.get::<i64>(0)?, r.get::<i64>(1)?))
            })
            .unwrap();
        assert_eq!(v, (5, 10), "through Db, $N is parameter N");
    }
}
