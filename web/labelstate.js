// The set being edited: labels chosen (in codebook order), each with confidence, quote and
// fields; which label has the focus. Pure data: no DOM.

/** A new, empty set. */
export function emptySet() {
  return { labels: new Map(), focused: null };
}

/** The editable copy of a stored set's labels (LabelRecord[]). */
export function fromRecords(records) {
  const set = emptySet();
  for (const r of records || []) {
    set.labels.set(r.id, {
      confidence: typeof r.confidence === 'number' ? r.confidence : 1,
      quote: (r.evidence && r.evidence.quote) || '',
      fields: { ...(r.fields || {}) },
    });
    set.focused = r.id;
  }
  return set;
}

/** Chooses or drops label `id`; a chosen label takes the focus. */
export function toggle(set, id) {
  if (set.labels.has(id)) {
    set.labels.delete(id);
    if (set.focused === id) set.focused = [...set.labels.keys()].pop() || null;
  } else {
    set.labels.set(id, { confidence: 1, quote: '', fields: {} });
    set.focused = id;
  }
}

/** The set as the API's records, in the codebook's order. */
export function toRecords(set, codebook) {
  const order = codebook.labels.map((l) => l.id);
  return [...set.labels.entries()]
    .sort((a, b) => order.indexOf(a[0]) - order.indexOf(b[0]))
    .map(([id, l]) => {
      const record = { id, confidence: l.confidence };
      if (l.quote) record.evidence = { quote: l.quote };
      const fields = Object.fromEntries(
        Object.entries(l.fields).filter(([, v]) => v !== '' && v !== null && v !== undefined),
      );
      if (Object.keys(fields).length) record.fields = fields;
      return record;
    });
}

/** A field's value from its input's text, as its codebook type wants it. */
export function fieldValue(type, raw) {
  if (raw === '' || raw === null || raw === undefined) return '';
  if (type === 'number') return Number(raw);
  if (type === 'integer') return Math.trunc(Number(raw));
  if (type === 'boolean') return raw === true || raw === 'true';
  if (type === 'list[string]') return String(raw).split(',').map((s) => s.trim()).filter(Boolean);
  return String(raw);
}

/** The set as plain JSON (for drafts). */
export function toJson(set) {
  return { focused: set.focused, labels: [...set.labels.entries()] };
}

/** The set back from `toJson`. */
export function fromJson(json) {
  const set = emptySet();
  for (const [id, l] of json.labels || []) set.labels.set(id, l);
  set.focused = json.focused || null;
  return set;
}
