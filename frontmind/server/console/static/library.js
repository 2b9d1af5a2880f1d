// Reminders, memories and documents: view, add, complete, delete.

import { api, ApiError, q } from "./api.js";
import { fmt, h, when } from "./dom.js";

function panel(title, id, form, list, more) {
  return h("section", { class: "panel", id }, h("h2", {}, title), form, list, more);
}

// A list a page at a time: `load()` shows the first page, "More" adds the next while the
// API has one. A long-lived user has hundreds of each; with only the first page, the
// rest (the newest reminders, listed oldest first) could not be seen or acted on.
function paged(list, key, path, item, onError) {
  const more = h("button", { type: "button", class: "small" }, "More");
  more.hidden = true;
  let cursor = null;
  const show = async (next) => {
    const page = await api(`${path()}${next ? `&cursor=${q(cursor)}` : ""}`);
    const items = page[key].map(item);
    if (next) list.append(...items);
    else list.replaceChildren(...items);
    if (!list.children.length) list.append(h("li", { class: "muted" }, "None."));
    cursor = page.next_cursor;
    more.hidden = !cursor;
  };
  more.addEventListener("click", () => {
    // Until its page is in: a second click would ask for the same page and add it twice.
    more.disabled = true;
    show(true).catch(onError).finally(() => { more.disabled = false; });
  });
  return { load: () => show(false), more };
}

// After a completion or a delete only that item changes: reloading the first page took
// away every page "More" had added, and the user's place in the list with them.
function settle(list, selector, replacement) {
  const li = list.querySelector(selector);
  if (li && replacement) li.replaceWith(replacement);
  else if (li) li.remove();
  if (!list.children.length) list.append(h("li", { class: "muted" }, "None."));
}

// DELETE, where "not found" is done as well: deleted meanwhile (another tab, the API, the
// model) it stayed listed, and each click said not_found again.
async function remove(path) {
  try {
    await api(path, { method: "DELETE" });
  } catch (error) {
    if (!(error instanceof ApiError && error.status === 404)) throw error;
  }
}

function act(label, run, onError, cls = "") {
  return h("button", { type: "button", class: `small ${cls}`, onclick: () => run().catch(onError) }, label);
}

export async function libraryView(view, onError) {
  document.title = "Library · Frontmind";
  const reminders = h("ul", { class: "items", id: "reminder-list" });
  const memories = h("ul", { class: "items", id: "memory-list" });
  const documents = h("ul", { class: "items", id: "document-list" });
  const showDone = h("input", { type: "checkbox", id: "show-completed" });

  const reminderItem = (r) => h("li", { class: r.completed_at ? "done" : "", "data-id": r.id },
    h("span", { class: "item-text" }, r.text),
    h("span", { class: "muted" }, r.due_at ? ` due ${when(r.due_at)}` : ""),
    h("span", { class: "actions" },
      r.completed_at ? h("span", { class: "muted" }, "completed") : act("Complete", async () => {
        const done = await api(`/v1/reminders/${r.id}/complete`, { method: "POST", body: {} });
        settle(reminders, `li[data-id="${r.id}"]`, showDone.checked ? reminderItem(done) : null);
      }, onError),
      act("Delete", async () => { await remove(`/v1/reminders/${r.id}`); settle(reminders, `li[data-id="${r.id}"]`); }, onError, "danger")));
  const reminderList = paged(reminders, "reminders", () => `/v1/reminders?limit=200${showDone.checked ? "&include_completed=true" : ""}`,
    reminderItem, onError);
  const loadReminders = reminderList.load;
  const memoryList = paged(memories, "memories", () => "/v1/memories?limit=200",
    (m) => h("li", { "data-id": m.id },
      h("span", { class: "item-text" }, m.text),
      h("span", { class: "muted" }, ` importance ${fmt(m.importance, 2)}`),
      h("span", { class: "actions" }, act("Delete", async () => { await remove(`/v1/memories/${m.id}`); settle(memories, `li[data-id="${m.id}"]`); }, onError, "danger"))),
    onError);
  const loadMemories = memoryList.load;
  const documentList = paged(documents, "documents", () => "/v1/documents?limit=200",
    (d) => h("li", { "data-label": d.label },
      h("details", {}, h("summary", {}, h("strong", {}, d.label), h("span", { class: "muted" }, ` ${fmt(d.content.length)} chars`)), h("pre", { class: "full" }, d.content)),
      h("span", { class: "actions" }, act("Delete", async () => { await remove(`/v1/documents/${q(d.label)}`); settle(documents, `li[data-label="${CSS.escape(d.label)}"]`); }, onError, "danger"))),
    onError);
  const loadDocuments = documentList.load;

  const submit = (run) => (event) => {
    event.preventDefault();
    const form = event.target;
    run(form.elements).then(() => form.reset()).catch(onError);
  };
  const reminderForm = h("form", { class: "add", id: "add-reminder", onsubmit: submit(async (f) => {
    const body = { text: f.text.value };
    if (f.due.value) body.due_at = new Date(f.due.value).toISOString();
    await api("/v1/reminders", { method: "POST", body });
    await loadReminders();
  }) },
    h("input", { name: "text", placeholder: "Remind me to…", required: true }),
    h("input", { name: "due", type: "datetime-local", "aria-label": "due (optional)" }),
    h("button", { type: "submit" }, "Add reminder"));
  const memoryForm = h("form", { class: "add", id: "add-memory", onsubmit: submit(async (f) => {
    await api("/v1/memories", { method: "POST", body: { text: f.text.value, importance: Number(f.importance.value) } });
    await loadMemories();
  }) },
    h("input", { name: "text", placeholder: "Something to remember", required: true }),
    h("input", { name: "importance", type: "number", min: 0, max: 1, step: 0.1, value: 0.5, "aria-label": "importance" }),
    h("button", { type: "submit" }, "Add memory"));
  const documentForm = h("form", { class: "add", id: "add-document", onsubmit: submit(async (f) => {
    await api("/v1/documents", { method: "POST", body: { label: f.label.value, content: f.content.value } });
    await loadDocuments();
  }) },
    h("input", { name: "label", placeholder: "label", required: true }),
    h("textarea", { name: "content", rows: 2, placeholder: "content", required: true }),
    h("button", { type: "submit" }, "Put document"));
  showDone.addEventListener("change", () => loadReminders().catch(onError));

  view.replaceChildren(h("div", { class: "library" },
    panel("Reminders", "reminders", h("div", {}, reminderForm, h("label", { class: "muted" }, showDone, " show completed")), reminders, reminderList.more),
    panel("Memories", "memories", memoryForm, memories, memoryList.more),
    panel("Documents", "documents", documentForm, documents, documentList.more)));
  await Promise.all([loadReminders(), loadMemories(), loadDocuments()]);
}
