/* amqpscope's display filter (-Y) in the page: a port of amqpscope/filter.py (its tokens,
 * grammar, evaluation and error messages, columns counted in code points as Python does) and,
 * for `matches`, of the parser of Python's re (re/_parser.py: its syntax and its errors), which
 * writes the pattern out as a JavaScript RegExp (flag v) meaning what Python's would.
 * tests/test_report_filter.py runs both on the same records and compares. Known differences:
 * \N{NAME} escapes and conditional groups (?(1)a|b) are refused here ("use read -Y"), and a
 * backreference to a group that did not take part matches empty here, fails in Python. */
var amqpscopeFilter = (function () {
  "use strict";
  var MISSING = { missing: true };
  // Python's str.isspace (its re's \s, str.strip), \w (str.isalnum and _), \d (decimals)
  var SPACE = "\\t-\\r\\x1c- \\x85\\xa0\\u1680\\u2000-\\u200a\\u2028\\u2029\\u202f\\u205f\\u3000";
  var WORD = "\\p{L}\\p{N}_";
  var DIGIT = "\\p{Nd}";
  var TOKEN = new RegExp("[" + SPACE + "]*(?:" +
    "(\"(?:[^\"\\\\]|\\\\[^\\n])*\"|'(?:[^'\\\\]|\\\\[^\\n])*')" +
    "|(-?[" + DIGIT + "]+(?:\\.[" + DIGIT + "]+)?(?:[eE][-+]?[" + DIGIT + "]+)?(?![" + WORD + "\\-]))" +
    "|(==|!=|<=|>=|<|>|&&|\\|\\||!|\\(|\\)|\\[|\\]|\\.)" +
    "|([A-Za-z_$][" + WORD + "$]*(?:-[" + WORD + "$]+)*))", "uy");
  var BLANK = new RegExp("^[" + SPACE + "]*$", "u");
  var LEADING = new RegExp("^[" + SPACE + "]*", "u");
  var KINDS = ["string", "number", "op", "word"];
  var COMPARISONS = ["==", "!=", "<", ">", "<=", ">=", "contains", "matches"];
  var KEYWORDS = ["and", "or", "not", "true", "false", "null", "contains", "matches"];
  var UNPRINTABLE = /^[\p{Cc}\p{Cf}\p{Cs}\p{Co}\p{Cn}\p{Zl}\p{Zp}\p{Zs}]$/u;
  var hasOwn = Object.prototype.hasOwnProperty;

  function FilterError(message, column) {
    this.message = "column " + column + ": " + message;
    this.column = column;
  }

  function codePoints(text) { return Array.from(text); }
  function column(text, index) { return codePoints(text.slice(0, index)).length + 1; }
  function hex(c, width) { var h = c.toString(16); while (h.length < width) h = "0" + h; return h; }

  /* Python's repr() of a str */
  function pyRepr(s) {
    var quote = s.indexOf("'") >= 0 && s.indexOf('"') < 0 ? '"' : "'";
    var out = quote;
    codePoints(s).forEach(function (ch) {
      var c = ch.codePointAt(0);
      if (ch === quote || ch === "\\") out += "\\" + ch;
      else if (ch === "\t") out += "\\t";
      else if (ch === "\n") out += "\\n";
      else if (ch === "\r") out += "\\r";
      else if (c < 0x20 || c === 0x7f) out += "\\x" + hex(c, 2);
      else if (c < 0x7f || (ch !== " " && !UNPRINTABLE.test(ch))) out += ch;
      else if (c === 0x20) out += ch;
      else if (c <= 0xff) out += "\\x" + hex(c, 2);
      else if (c <= 0xffff) out += "\\u" + hex(c, 4);
      else out += "\\U" + hex(c, 8);
    });
    return out + quote;
  }

  /* Unicode decimal digits as ASCII ones (Python's int() and float() take any) */
  var NDIGIT = /\p{Nd}/u;
  function asciiDigits(text) {
    return codePoints(text).map(function (ch) {
      if (ch >= "0" && ch <= "9" || !NDIGIT.test(ch)) return ch;
      var c = ch.codePointAt(0), zero = c;  // Nd come in runs of ten, 0 to 9
      while (NDIGIT.test(String.fromCodePoint(zero - 1)) && c - zero < 9) zero--;
      return String((c - zero) % 10);
    }).join("");
  }
  function pyInt(text) {
    var ascii = asciiDigits(text), n = Number(ascii);
    return Number.isSafeInteger(n) ? n : BigInt(ascii);
  }

  function tokenize(text) {
    var tokens = [], pos = 0;
    while (pos < text.length) {
      if (BLANK.test(text.slice(pos))) break;
      TOKEN.lastIndex = pos;
      var m = TOKEN.exec(text);
      if (!m || TOKEN.lastIndex === pos) {
        var at = pos + LEADING.exec(text.slice(pos))[0].length;
        throw new FilterError("unexpected character " + pyRepr(String.fromCodePoint(text.codePointAt(at))), column(text, at));
      }
      for (var g = 1; g <= 4; g++) {
        if (m[g] !== undefined) {
          tokens.push([KINDS[g - 1], m[g], column(text, TOKEN.lastIndex - m[g].length)]);
          break;
        }
      }
      pos = TOKEN.lastIndex;
    }
    tokens.push(["end", "", codePoints(text).length + 1]);
    return tokens;
  }

  var MAX_NESTING = 100;  // filter.py's MAX_NESTING
  function Parser(text) { this.tokens = tokenize(text); this.index = 0; this.depth = 0; }
  Parser.prototype.nest = function (col) {
    this.depth += 1;
    if (this.depth > MAX_NESTING) throw new FilterError("nested too deeply (more than " + MAX_NESTING + " levels)", col);
  };
  Parser.prototype.peek = function () { return this.tokens[this.index]; };
  Parser.prototype.take = function () { return this.tokens[this.index++]; };
  Parser.prototype.isWord = function (words) {
    var t = this.peek();
    return (t[0] === "word" || t[0] === "op") && words.indexOf(t[1]) >= 0;
  };
  Parser.prototype.parse = function () {
    if (this.peek()[0] === "end") throw new FilterError("empty filter", 1);
    var predicate = this.orExpr(), t = this.peek();
    if (t[0] !== "end") throw new FilterError("unexpected " + pyRepr(t[1]) + "; expected 'and', 'or' or the end", t[2]);
    return predicate;
  };
  Parser.prototype.orExpr = function () {
    var parts = [this.andExpr()];
    while (this.isWord(["or", "||"])) { this.take(); parts.push(this.andExpr()); }
    if (parts.length === 1) return parts[0];
    return function (r) { return parts.some(function (p) { return p(r); }); };
  };
  Parser.prototype.andExpr = function () {
    var parts = [this.notExpr()];
    while (this.isWord(["and", "&&"])) { this.take(); parts.push(this.notExpr()); }
    if (parts.length === 1) return parts[0];
    return function (r) { return parts.every(function (p) { return p(r); }); };
  };
  Parser.prototype.notExpr = function () {
    if (this.isWord(["not", "!"])) {
      this.nest(this.take()[2]);
      var inner = this.notExpr();
      this.depth -= 1;
      return function (r) { return !inner(r); };
    }
    return this.primary();
  };
  Parser.prototype.primary = function () {
    var t = this.peek();
    if (t[0] === "op" && t[1] === "(") {
      this.nest(this.take()[2]);
      var inner = this.orExpr();
      t = this.take();
      if (t[1] !== ")") throw new FilterError("expected ')'", t[2]);
      this.depth -= 1;
      return inner;
    }
    if (t[0] !== "word" || KEYWORDS.indexOf(t[1]) >= 0) {
      throw new FilterError("expected a field name, found " + (t[0] === "end" ? "the end" : pyRepr(t[1])), t[2]);
    }
    var path = this.path();
    t = this.peek();
    if (COMPARISONS.indexOf(t[1]) < 0 || (t[0] !== "op" && t[0] !== "word")) {
      return function (r) { return truthy(lookup(r, path)); };
    }
    this.take();
    var valueColumn = this.peek()[2];
    return comparison(path, t[1], this.value(t[1]), valueColumn);
  };
  Parser.prototype.path = function () {
    var steps = [this.take()[1]];
    for (;;) {
      var t = this.peek();
      if (t[1] === ".") {
        this.take();
        t = this.take();
        if (t[0] !== "word") throw new FilterError("expected a name after '.'", t[2]);
        steps.push(t[1]);
      } else if (t[1] === "[") {
        this.take();
        t = this.take();
        if (t[0] !== "number" || !/^[\p{Nd}]+$/u.test(t[1].replace(/^-+/, ""))) throw new FilterError("expected an integer index", t[2]);
        var index = pyInt(t[1]);
        steps.push({ index: typeof index === "bigint" ? (index < 0n ? -Infinity : Infinity) : index });
        if (this.take()[1] !== "]") throw new FilterError("expected ']'", t[2] + codePoints(t[1]).length);
      } else {
        return steps;
      }
    }
  };
  Parser.prototype.value = function (op) {
    var t = this.take();
    if (t[0] === "string") return t[1].slice(1, -1).replace(/\\([^\n])/gu, "$1");
    if (t[0] === "number") return /[.eE]/.test(t[1]) ? Number(asciiDigits(t[1])) : pyInt(t[1]);
    if (t[0] === "word" && (t[1] === "true" || t[1] === "false" || t[1] === "null")) {
      return { "true": true, "false": false, "null": null }[t[1]];
    }
    throw new FilterError("expected a value after " + pyRepr(op) + ", found " + (t[0] === "end" ? "the end" : pyRepr(t[1])), t[2]);
  };

  function lookup(record, path) {
    var value = record;
    for (var i = 0; i < path.length; i++) {
      var step = path[i];
      if (typeof step === "object") {
        var n = step.index;
        if (!Array.isArray(value) || !(-value.length <= n && n < value.length)) return MISSING;
        value = value[n < 0 ? value.length + n : n];
      } else if (isDict(value) && hasOwn.call(value, step)) {
        value = value[step];
      } else {
        return MISSING;
      }
    }
    return value;
  }
  function isDict(v) { return v !== null && typeof v === "object" && !Array.isArray(v) && v !== MISSING; }
  function isNumber(v) { return typeof v === "number" || typeof v === "bigint"; }
  function truthy(v) {
    if (v === MISSING || v === null || v === false || v === "") return false;
    if (typeof v === "number") return v !== 0;
    if (Array.isArray(v)) return v.length > 0;
    if (typeof v === "object") return Object.keys(v).length > 0;
    return true;
  }
  /* Python's ==, for a value of a record and a filter's value (a scalar); bool as int */
  function pyEq(a, b) {
    var x = typeof a === "boolean" ? Number(a) : a, y = typeof b === "boolean" ? Number(b) : b;
    if (isNumber(x) && isNumber(y)) return x == y;  // exact across number and BigInt
    if (typeof x === "string" && typeof y === "string") return x === y;
    return a === null && b === null;
  }
  /* filter.py's _same: booleans equal only booleans */
  function same(v, e) {
    if (typeof v === "boolean" || typeof e === "boolean") return typeof v === "boolean" && typeof e === "boolean" && v === e;
    return pyEq(v, e);
  }
  /* Python's order of str: by code point (JavaScript's < goes by UTF-16 unit) */
  function compareText(a, b) {
    for (var i = 0, j = 0; i < a.length && j < b.length;) {
      var x = a.codePointAt(i), y = b.codePointAt(j);
      if (x !== y) return x < y ? -1 : 1;
      i += x > 0xffff ? 2 : 1; j += y > 0xffff ? 2 : 1;
    }
    return (a.length - i > 0 ? 1 : 0) - (b.length - j > 0 ? 1 : 0);
  }
  function order(v, e, op) {
    var c;
    if (typeof v === "string" && typeof e === "string") c = compareText(v, e);
    else if (isNumber(v) && isNumber(e)) {
      if (op === "<") return v < e;
      if (op === ">") return v > e;
      if (op === "<=") return v <= e;
      return v >= e;
    } else return false;  // booleans, and mixed kinds, have no order
    return op === "<" ? c < 0 : op === ">" ? c > 0 : op === "<=" ? c <= 0 : c >= 0;
  }

  function comparison(path, op, expected, col) {
    if (op === "matches") {
      if (typeof expected !== "string") throw new FilterError("'matches' needs a quoted regular expression", col);
      var pattern;
      try {
        pattern = pythonRegExp(expected);
      } catch (exc) {
        if (exc instanceof RegexError) throw new FilterError("bad regular expression: " + exc.message, col);
        throw exc;
      }
      return function (r) {
        var value = lookup(r, path);
        return typeof value === "string" && pattern.test(value);
      };
    }
    if (op === "contains") {
      return function (r) {
        var value = lookup(r, path);
        if (typeof value === "string") return typeof expected === "string" && value.indexOf(expected) >= 0;
        if (Array.isArray(value)) return value.some(function (item) { return pyEq(item, expected); });
        if (isDict(value)) return typeof expected === "string" && hasOwn.call(value, expected);
        return false;
      };
    }
    return function (r) {
      var value = lookup(r, path);
      if (value === MISSING) return false;
      if (op === "==") return same(value, expected);
      if (op === "!=") return !same(value, expected);
      if (typeof value === "boolean" || typeof expected === "boolean") return false;
      return order(value, expected, op);
    };
  }

  // ---- Python's re: its parser (re/_parser.py), writing a JavaScript RegExp ----
  var MAXREPEAT = 4294967295, MAXGROUPS = 1073741823;
  var F = { i: 2, L: 4, m: 8, s: 16, u: 32, x: 64, a: 256, t: 1 };
  var TYPE_FLAGS = F.a | F.L | F.u, GLOBAL_FLAGS = F.t;
  var DIGITS = "0123456789", OCTDIGITS = "01234567", HEXDIGITS = "0123456789abcdefABCDEF";
  var WHITESPACE = " \t\n\r\v\f", SPECIAL = ".\\[{()*+?^$|", REPEAT = "*+?{";
  var ESCAPES = { "\\a": 7, "\\b": 8, "\\f": 12, "\\n": 10, "\\r": 13, "\\t": 9, "\\v": 11, "\\\\": 92 };
  var CATEGORIES = {
    "\\A": ["AT", "BEGINNING_STRING"], "\\b": ["AT", "BOUNDARY"], "\\B": ["AT", "NON_BOUNDARY"],
    "\\d": ["IN", [["CATEGORY", "DIGIT"]]], "\\D": ["IN", [["CATEGORY", "NOT_DIGIT"]]],
    "\\s": ["IN", [["CATEGORY", "SPACE"]]], "\\S": ["IN", [["CATEGORY", "NOT_SPACE"]]],
    "\\w": ["IN", [["CATEGORY", "WORD"]]], "\\W": ["IN", [["CATEGORY", "NOT_WORD"]]],
    "\\Z": ["AT", "END_STRING"]
  };
  var REPEATS = ["MIN_REPEAT", "MAX_REPEAT", "POSSESSIVE_REPEAT"];
  var UNITS = ["ANY", "RANGE", "IN", "LITERAL", "NOT_LITERAL", "CATEGORY"];
  var ASCIILETTER = /^[A-Za-z]$/, ALPHA = /^\p{L}$/u, IDENT = /^[\p{ID_Start}_][\p{ID_Continue}]*$/u;
  function inSet(c, set) { return c !== null && c.length === 1 && set.indexOf(c) >= 0; }

  /* re.error's text; `chars` the pattern's code points, `pos` an index in them */
  function RegexError(msg, chars, pos) {
    var text = msg;
    if (pos !== undefined) {
      text += " at position " + pos;
      if (chars.indexOf("\n") >= 0) {
        var before = chars.slice(0, pos);
        var line = before.filter(function (c) { return c === "\n"; }).length + 1;
        text += " (line " + line + ", column " + (pos - before.lastIndexOf("\n")) + ")";
      }
    }
    this.message = text;
  }

  function Source(text) {
    this.chars = codePoints(text);
    this.index = 0;
    this.next = null;
    this.advance();
  }
  Source.prototype.advance = function () {
    var index = this.index;
    if (index >= this.chars.length) { this.next = null; return; }
    var ch = this.chars[index];
    if (ch === "\\") {
      index++;
      if (index >= this.chars.length) throw new RegexError("bad escape (end of pattern)", this.chars, this.chars.length - 1);
      ch += this.chars[index];
    }
    this.index = index + 1;
    this.next = ch;
  };
  Source.prototype.match = function (ch) { if (ch === this.next) { this.advance(); return true; } return false; };
  Source.prototype.get = function () { var t = this.next; this.advance(); return t; };
  Source.prototype.getwhile = function (n, set) {
    var out = "";
    for (var k = 0; k < n; k++) {
      if (!inSet(this.next, set)) break;
      out += this.next; this.advance();
    }
    return out;
  };
  Source.prototype.getuntil = function (terminator, name) {
    var out = "";
    for (;;) {
      var c = this.next;
      this.advance();
      if (c === null) {
        if (!out) throw this.error("missing " + name);
        throw this.error("missing " + terminator + ", unterminated name", codePoints(out).length);
      }
      if (c === terminator) {
        if (!out) throw this.error("missing " + name, 1);
        break;
      }
      out += c;
    }
    return out;
  };
  Source.prototype.tell = function () { return this.index - (this.next === null ? 0 : this.next.length); };
  Source.prototype.seek = function (index) { this.index = index; this.advance(); };
  Source.prototype.error = function (msg, offset) { return new RegexError(msg, this.chars, this.tell() - (offset || 0)); };
  Source.prototype.checkgroupname = function (name, offset) {
    if (!IDENT.test(name)) throw this.error("bad character in group name " + pyRepr(name), codePoints(name).length + offset);
  };
  function len(s) { return codePoints(s).length; }

  function State() { this.flags = 0; this.groupdict = {}; this.groupwidths = [null]; this.lookbehindgroups = null; this.grouprefpos = {}; }
  State.prototype.groups = function () { return this.groupwidths.length; };
  State.prototype.opengroup = function (name, source) {
    var gid = this.groups();
    this.groupwidths.push(null);
    if (this.groups() > MAXGROUPS) throw source.error("too many groups", name === null ? 1 : len(name) + 1);
    if (name !== null) {
      if (hasOwn.call(this.groupdict, name)) {
        throw source.error("redefinition of group name " + pyRepr(name) + " as group " + gid + "; was group " + this.groupdict[name], len(name) + 1);
      }
      this.groupdict[name] = gid;
    }
    return gid;
  };
  State.prototype.checkgroup = function (gid) { return gid < this.groups() && this.groupwidths[gid] !== null; };
  State.prototype.checklookbehindgroup = function (gid, source) {
    if (this.lookbehindgroups !== null) {
      if (!this.checkgroup(gid)) throw source.error("cannot refer to an open group");
      if (gid >= this.lookbehindgroups) throw source.error("cannot refer to group defined in the same lookbehind subpattern");
    }
  };

  function Sub(state) { this.state = state; this.data = []; this.width = null; }
  Sub.prototype.getwidth = function () {
    if (this.width !== null) return this.width;
    var lo = 0, hi = 0;
    for (var k = 0; k < this.data.length; k++) {
      var op = this.data[k][0], av = this.data[k][1], w;
      if (op === "BRANCH") {
        var i = MAXREPEAT - 1, j = 0;
        av.forEach(function (b) { var bw = b.getwidth(); i = Math.min(i, bw[0]); j = Math.max(j, bw[1]); });
        lo += i; hi += j;
      } else if (op === "ATOMIC_GROUP") { w = av.getwidth(); lo += w[0]; hi += w[1]; }
      else if (op === "SUBPATTERN") { w = av[3].getwidth(); lo += w[0]; hi += w[1]; }
      else if (REPEATS.indexOf(op) >= 0) { w = av[2].getwidth(); lo += w[0] * av[0]; hi += w[1] * av[1]; }
      else if (UNITS.indexOf(op) >= 0) { lo += 1; hi += 1; }
      else if (op === "GROUPREF") { w = this.state.groupwidths[av]; lo += w[0]; hi += w[1]; }
    }
    this.width = [Math.min(lo, MAXREPEAT - 1), Math.min(hi, MAXREPEAT)];
    return this.width;
  };

  function classEscape(source, escape) {
    if (hasOwn.call(ESCAPES, escape)) return ["LITERAL", ESCAPES[escape]];
    var code = CATEGORIES[escape];
    if (code && code[0] === "IN") return code;
    var c = escape.slice(1, 2), value;
    if (c === "x" || c === "u" || c === "U") {
      var width = { x: 2, u: 4, U: 8 }[c];
      escape += source.getwhile(width, HEXDIGITS);
      if (escape.length !== width + 2) throw source.error("incomplete escape " + escape, escape.length);
      value = parseInt(escape.slice(2), 16);
      if (value > 0x10ffff) throw source.error("bad escape " + escape, escape.length);
      return ["LITERAL", value];
    }
    if (c === "N") return named(source);
    if (inSet(c, OCTDIGITS)) {
      escape += source.getwhile(2, OCTDIGITS);
      value = parseInt(escape.slice(1), 8);
      if (value > 255) throw source.error("octal escape value " + escape + " outside of range 0-0o377", escape.length);
      return ["LITERAL", value];
    }
    if (!inSet(c, DIGITS) && len(escape) === 2) {
      if (ASCIILETTER.test(c)) throw source.error("bad escape " + escape, len(escape));
      return ["LITERAL", escape.codePointAt(1)];
    }
    throw source.error("bad escape " + escape, len(escape));
  }
  function named(source) {
    if (!source.match("{")) throw source.error("missing {");
    var name = source.getuntil("}", "character name");
    throw source.error("the page cannot look up \\N{" + name + "}: use read -Y", len(name) + 4);
  }
  function escapeCode(source, escape, state) {
    if (hasOwn.call(CATEGORIES, escape)) return CATEGORIES[escape];
    if (hasOwn.call(ESCAPES, escape)) return ["LITERAL", ESCAPES[escape]];
    var c = escape.slice(1, 2), value;
    if (c === "x" || c === "u" || c === "U") return classEscape(source, escape);
    if (c === "N") return named(source);
    if (c === "0") { escape += source.getwhile(2, OCTDIGITS); return ["LITERAL", parseInt(escape.slice(1), 8)]; }
    if (inSet(c, DIGITS)) {
      if (inSet(source.next, DIGITS)) {
        escape += source.get();
        if (inSet(escape[1], OCTDIGITS) && inSet(escape[2], OCTDIGITS) && inSet(source.next, OCTDIGITS)) {
          escape += source.get();
          value = parseInt(escape.slice(1), 8);
          if (value > 255) throw source.error("octal escape value " + escape + " outside of range 0-0o377", escape.length);
          return ["LITERAL", value];
        }
      }
      var group = parseInt(escape.slice(1), 10);
      if (group < state.groups()) {
        if (!state.checkgroup(group)) throw source.error("cannot refer to an open group", escape.length);
        state.checklookbehindgroup(group, source);
        return ["GROUPREF", group];
      }
      throw source.error("invalid group reference " + group, escape.length - 1);
    }
    if (len(escape) === 2) {
      if (ASCIILETTER.test(c)) throw source.error("bad escape " + escape, len(escape));
      return ["LITERAL", escape.codePointAt(1)];
    }
    throw source.error("bad escape " + escape, len(escape));
  }

  function parseSub(source, state, verbose, nested) {
    var items = [];
    for (;;) {
      items.push(parseSeq(source, state, verbose, nested + 1, !nested && !items.length));
      if (!source.match("|")) break;
      if (!nested) verbose = state.flags & F.x;
    }
    if (items.length === 1) return items[0];
    var sub = new Sub(state);
    sub.data.push(["BRANCH", items]);
    return sub;
  }

  function parseFlags(source, state, ch) {
    var add = 0, del = 0;
    if (ch !== "-") {
      for (;;) {
        var flag = F[ch];
        if (ch === "L") throw source.error("bad inline flags: cannot use 'L' flag with a str pattern");
        add |= flag;
        if ((flag & TYPE_FLAGS) && (add & TYPE_FLAGS) !== flag) throw source.error("bad inline flags: flags 'a', 'u' and 'L' are incompatible");
        ch = source.get();
        if (ch === null) throw source.error("missing -, : or )");
        if (inSet(ch, ")-:")) break;
        if (!hasOwn.call(F, ch)) throw source.error(ALPHA.test(ch) ? "unknown flag" : "missing -, : or )", len(ch));
      }
    }
    if (ch === ")") { state.flags |= add; return null; }
    if (add & GLOBAL_FLAGS) throw source.error("bad inline flags: cannot turn on global flag", 1);
    if (ch === "-") {
      ch = source.get();
      if (ch === null) throw source.error("missing flag");
      if (!hasOwn.call(F, ch)) throw source.error(ALPHA.test(ch) ? "unknown flag" : "missing flag", len(ch));
      for (;;) {
        var off = F[ch];
        if (off & TYPE_FLAGS) throw source.error("bad inline flags: cannot turn off flags 'a', 'u' and 'L'");
        del |= off;
        ch = source.get();
        if (ch === null) throw source.error("missing :");
        if (ch === ":") break;
        if (!hasOwn.call(F, ch)) throw source.error(ALPHA.test(ch) ? "unknown flag" : "missing :", len(ch));
      }
    }
    if (del & GLOBAL_FLAGS) throw source.error("bad inline flags: cannot turn off global flag", 1);
    if (add & del) throw source.error("bad inline flags: flag turned on and off", 1);
    return [add, del];
  }

  function parseSeq(source, state, verbose, nested, first) {
    var sub = new Sub(state), data = sub.data;
    for (;;) {
      var ch = source.next;
      if (ch === null || ch === "|" || ch === ")") break;
      source.get();
      if (verbose) {
        if (inSet(ch, WHITESPACE)) continue;
        if (ch === "#") {
          for (;;) { ch = source.get(); if (ch === null || ch === "\n") break; }
          continue;
        }
      }
      if (ch[0] === "\\") {
        data.push(escapeCode(source, ch, state));
      } else if (!inSet(ch, SPECIAL)) {
        data.push(["LITERAL", ch.codePointAt(0)]);
      } else if (ch === "[") {
        parseSet(source, data);
      } else if (inSet(ch, REPEAT)) {
        var here = source.tell(), min, max;
        if (ch === "?") { min = 0; max = 1; }
        else if (ch === "*") { min = 0; max = MAXREPEAT; }
        else if (ch === "+") { min = 1; max = MAXREPEAT; }
        else {
          if (source.next === "}") { data.push(["LITERAL", 123]); continue; }
          min = 0; max = MAXREPEAT;
          var lo = "", hi = "";
          while (inSet(source.next, DIGITS)) lo += source.get();
          if (source.match(",")) { while (inSet(source.next, DIGITS)) hi += source.get(); }
          else hi = lo;
          if (!source.match("}")) { data.push(["LITERAL", 123]); source.seek(here); continue; }
          if (lo) { min = Number(lo); if (min >= MAXREPEAT) throw new RegexError("the repetition number is too large"); }
          if (hi) {
            max = Number(hi);
            if (max >= MAXREPEAT) throw new RegexError("the repetition number is too large");
            if (max < min) throw source.error("min repeat greater than max repeat", source.tell() - here);
          }
        }
        var item = data.length ? data[data.length - 1] : null;
        if (!item || item[0] === "AT") throw source.error("nothing to repeat", source.tell() - here + ch.length);
        if (REPEATS.indexOf(item[0]) >= 0) throw source.error("multiple repeat", source.tell() - here + ch.length);
        var inner = new Sub(state);
        inner.data.push(item);
        var kind = source.match("?") ? "MIN_REPEAT" : source.match("+") ? "POSSESSIVE_REPEAT" : "MAX_REPEAT";
        data[data.length - 1] = [kind, [min, max, inner]];
      } else if (ch === ".") {
        data.push(["ANY", null]);
      } else if (ch === "(") {
        var start = source.tell() - 1, capture = true, atomic = false, name = null, add = 0, del = 0;
        if (source.match("?")) {
          ch = source.get();
          if (ch === null) throw source.error("unexpected end of pattern");
          if (ch === "P") {
            if (source.match("<")) {
              name = source.getuntil(">", "group name");
              source.checkgroupname(name, 1);
            } else if (source.match("=")) {
              name = source.getuntil(")", "group name");
              source.checkgroupname(name, 1);
              if (!hasOwn.call(state.groupdict, name)) throw source.error("unknown group name " + pyRepr(name), len(name) + 1);
              var gid = state.groupdict[name];
              if (!state.checkgroup(gid)) throw source.error("cannot refer to an open group", len(name) + 1);
              state.checklookbehindgroup(gid, source);
              data.push(["GROUPREF", gid]);
              continue;
            } else {
              ch = source.get();
              if (ch === null) throw source.error("unexpected end of pattern");
              throw source.error("unknown extension ?P" + ch, len(ch) + 2);
            }
          } else if (ch === ":") {
            capture = false;
          } else if (ch === "#") {
            for (;;) {
              if (source.next === null) throw source.error("missing ), unterminated comment", source.tell() - start);
              if (source.get() === ")") break;
            }
            continue;
          } else if (inSet(ch, "=!<")) {
            var dir = 1, outer = null;
            if (ch === "<") {
              ch = source.get();
              if (ch === null) throw source.error("unexpected end of pattern");
              if (!inSet(ch, "=!")) throw source.error("unknown extension ?<" + ch, len(ch) + 2);
              dir = -1;
              outer = state.lookbehindgroups;
              if (outer === null) state.lookbehindgroups = state.groups();
            }
            var look = parseSub(source, state, verbose, nested + 1);
            if (dir < 0 && outer === null) state.lookbehindgroups = null;
            if (!source.match(")")) throw source.error("missing ), unterminated subpattern", source.tell() - start);
            data.push([ch === "=" ? "ASSERT" : "ASSERT_NOT", [dir, look]]);
            continue;
          } else if (ch === "(") {
            var cond = source.getuntil(")", "group name");
            throw source.error("the page cannot run conditional groups (?(" + cond + ")...): use read -Y", len(cond) + 1);
          } else if (ch === ">") {
            capture = false; atomic = true;
          } else if (hasOwn.call(F, ch) || ch === "-") {
            var flags = parseFlags(source, state, ch);
            if (flags === null) {
              if (!first || data.length) throw source.error("global flags not at the start of the expression", source.tell() - start);
              verbose = state.flags & F.x;
              continue;
            }
            add = flags[0]; del = flags[1]; capture = false;
          } else {
            throw source.error("unknown extension ?" + ch, len(ch) + 1);
          }
        }
        var group = capture ? state.opengroup(name, source) : null;
        var subVerbose = (verbose || (add & F.x)) && !(del & F.x);
        var p = parseSub(source, state, subVerbose, nested + 1);
        if (!source.match(")")) throw source.error("missing ), unterminated subpattern", source.tell() - start);
        if (group !== null) state.groupwidths[group] = p.getwidth();
        data.push(atomic ? ["ATOMIC_GROUP", p] : ["SUBPATTERN", [group, add, del, p]]);
      } else if (ch === "^") {
        data.push(["AT", "BEGINNING"]);
      } else if (ch === "$") {
        data.push(["AT", "END"]);
      }
    }
    return sub;
  }

  function parseSet(source, data) {
    var here = source.tell() - 1, set = [], negate = source.match("^"), code1, code2;
    for (;;) {
      var ch = source.get();
      if (ch === null) throw source.error("unterminated character set", source.tell() - here);
      if (ch === "]" && set.length) break;
      code1 = ch[0] === "\\" ? classEscape(source, ch) : ["LITERAL", ch.codePointAt(0)];
      if (source.match("-")) {
        var that = source.get();
        if (that === null) throw source.error("unterminated character set", source.tell() - here);
        if (that === "]") {
          set.push(code1[0] === "IN" ? code1[1][0] : code1);
          set.push(["LITERAL", 45]);
          break;
        }
        code2 = that[0] === "\\" ? classEscape(source, that) : ["LITERAL", that.codePointAt(0)];
        if (code1[0] !== "LITERAL" || code2[0] !== "LITERAL" || code2[1] < code1[1]) {
          throw source.error("bad character range " + ch + "-" + that, len(ch) + 1 + len(that));
        }
        set.push(["RANGE", [code1[1], code2[1]]]);
      } else {
        set.push(code1[0] === "IN" ? code1[1][0] : code1);
      }
    }
    if (set.length === 1 && set[0][0] === "LITERAL") data.push([negate ? "NOT_LITERAL" : "LITERAL", set[0][1]]);
    else data.push(["IN", negate ? [["NEGATE", null]].concat(set) : set]);
  }

  /* the parsed pattern as a JavaScript RegExp's source (flag v): what Python's flags mean is
   * written out (its ^ $ . \b \s \w \d, its lookbehinds checked fixed-width, its atomic groups
   * and possessive repeats as a lookahead and a backreference), so only i is a JS flag */
  function Writer() { this.groups = 0; this.numbers = [0]; }
  function lit(c) { return "\\u{" + c.toString(16) + "}"; }
  function categorySet(name, flags) {
    var ascii = flags & F.a;
    var sets = {
      DIGIT: ascii ? "0-9" : "\\p{Nd}",
      SPACE: ascii ? "\\t-\\r " : SPACE,
      WORD: ascii ? "A-Za-z0-9_" : WORD
    };
    var base = name.replace("NOT_", "");
    return (name.indexOf("NOT_") === 0 ? "[^" : "[") + sets[base] + "]";
  }
  Writer.prototype.sub = function (sub, flags) {
    var self = this;
    return sub.data.map(function (item) { return self.item(item, flags); }).join("");
  };
  Writer.prototype.item = function (item, flags) {
    var op = item[0], av = item[1], self = this, word, inner, n;
    switch (op) {
      case "LITERAL": return lit(av);
      case "NOT_LITERAL": return "[^" + lit(av) + "]";
      case "ANY": return flags & F.s ? "[\\s\\S]" : "[^\\n]";
      case "IN": {
        var negate = av.length && av[0][0] === "NEGATE";
        var parts = (negate ? av.slice(1) : av).map(function (c) {
          if (c[0] === "LITERAL") return lit(c[1]);
          if (c[0] === "RANGE") return lit(c[1][0]) + "-" + lit(c[1][1]);
          return categorySet(c[1], flags);
        });
        return "[" + (negate ? "^" : "") + parts.join("") + "]";
      }
      case "AT":
        word = categorySet("WORD", flags);
        return {
          BEGINNING: flags & F.m ? "(?<![^\\n])" : "(?<![\\s\\S])",
          END: flags & F.m ? "(?=\\n|(?![\\s\\S]))" : "(?=\\n?(?![\\s\\S]))",
          BEGINNING_STRING: "(?<![\\s\\S])",
          END_STRING: "(?![\\s\\S])",
          // neither matches in an empty string (Python 3.11)
          BOUNDARY: "(?:(?<=" + word + ")(?!" + word + ")|(?<!" + word + ")(?=" + word + "))",
          NON_BOUNDARY: "(?:(?<=" + word + ")(?=" + word + ")|(?<!" + word + ")(?!" + word + "))(?:(?<=[\\s\\S])|(?=[\\s\\S]))"
        }[av];
      case "BRANCH": return "(?:" + av.map(function (b) { return self.sub(b, flags); }).join("|") + ")";
      case "MIN_REPEAT": case "MAX_REPEAT": case "POSSESSIVE_REPEAT": {
        var bounds = av[0] === 0 && av[1] === MAXREPEAT ? "*" : av[0] === 1 && av[1] === MAXREPEAT ? "+"
          : "{" + av[0] + "," + (av[1] === MAXREPEAT ? "" : av[1]) + "}";
        if (op === "POSSESSIVE_REPEAT") return this.atomic(function () { return "(?:" + self.sub(av[2], flags) + ")" + bounds; });
        return "(?:" + this.sub(av[2], flags) + ")" + bounds + (op === "MIN_REPEAT" ? "?" : "");
      }
      case "SUBPATTERN": {
        var group = av[0], now = (flags | av[1]) & ~av[2], open = "(?:";
        if (group !== null) { n = ++this.groups; this.numbers[group] = n; open = "("; }
        inner = this.sub(av[3], now);
        if ((now & F.i) !== (flags & F.i)) inner = (now & F.i ? "(?i:" : "(?-i:") + inner + ")";
        return open + inner + ")";
      }
      case "ASSERT": case "ASSERT_NOT": {
        if (av[0] < 0) {
          var width = av[1].getwidth();
          if (width[0] !== width[1]) throw new RegexError("look-behind requires fixed-width pattern");
        }
        return "(?" + (av[0] < 0 ? "<" : "") + (op === "ASSERT" ? "=" : "!") + this.sub(av[1], flags) + ")";
      }
      case "ATOMIC_GROUP": return this.atomic(function () { return self.sub(av, flags); });
      case "GROUPREF": return "(?:\\" + this.numbers[av] + ")";
    }
    throw new RegexError("the page cannot run " + op + ": use read -Y");
  };
  /* (?>X) as (?=(X))\n: what the lookahead matched, taken whole, never given back */
  Writer.prototype.atomic = function (write) {
    var n = ++this.groups;
    return "(?:(?=(" + write() + "))\\" + n + ")";
  };

  var regexCache = new Map();
  function pythonRegExp(pattern) {
    if (regexCache.has(pattern)) return regexCache.get(pattern);
    var source = new Source(pattern), state = new State();
    var p = parseSub(source, state, 0, 0);
    if (state.flags & F.a && state.flags & F.u) throw new RegexError("ASCII and UNICODE flags are incompatible");
    if (source.next !== null) throw source.error("unbalanced parenthesis");
    var text = new Writer().sub(p, state.flags);
    var regex;
    try {
      regex = new RegExp(text, "v" + (state.flags & F.i ? "i" : ""));
    } catch (exc) {
      throw new RegexError("the page cannot run this pattern (" + exc.message + "): use read -Y");
    }
    if (regexCache.size > 100) regexCache.clear();
    regexCache.set(pattern, regex);
    return regex;
  }

  /* A filter's text → a predicate over frame records, or a FilterError. */
  function compile(text) { return new Parser(text).parse(); }

  return { compile: compile, FilterError: FilterError, pythonRegExp: pythonRegExp, RegexError: RegexError, pyRepr: pyRepr };
})();
