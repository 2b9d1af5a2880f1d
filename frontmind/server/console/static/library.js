// Reminders, memories and documents: view, add, complete, delete.

import { api, q } from "./api.js";
import { fmt, h, when } from "./dom.js";

function panel(title, id, form, list) {
  return h("section", { class: "panel", id }, h("h2", {}, title), form, list);
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

  const loadReminders = async () => {
    const page = await api(`/v1/reminders?limit=200${showDone.checked ? "&include_completed=true" : ""}`);
    reminders.replaceChildren(...page.reminders.map((r) => h("li", { class: r.completed_at ? "done" : "", "data-id": r.id },
      h("span", { class: "item-text" }, r.text),
      h("span", { class: "muted" }, r.due_at ? ` due ${when(r.due_at)}` : ""),
      h("span", { class: "actions" },
        r.completed_at ? h("span", { class: "muted" }, "completed") : act("Complete", async () => { await api(`/v1/reminders/${r.id}/complete`, { method: "POST", body: {} }); await loadReminders(); }, onError),
        act("Delete", async () => { await api(`/v1/reminders/${r.id}`, { method: "DELETE" }); await loadReminders(); }, onError, "danger")))));
    if (!page.reminders.length) reminders.append(h("li", { class: "muted" }, "None."));
  };
  const loadMemories = async () => {
    const page = await api("/v1/memories?limit=200");
    memories.replaceChildren(...page.memories.map((m) => h("li", { "data-id": m.id },
      h("span", { class: "item-text" }, m.text),
      h("span", { class: "muted" }, ` importance ${fmt(m.importance, 2)}`),
      h("span", { class: "actions" }, act("Delete", async () => { await api(`/v1/memories/${m.id}`, { method: "DELETE" }); await loadMemories(); }, onError, "danger")))));
    if (!page.memories.length) memories.append(h("li", { class: "muted" }, "None."));
  };
  const loadDocuments = async () => {
    const page = await api("/v1/documents?limit=200");
    documents.replaceChildren(...page.documents.map((d) => h("li", { "data-label": d.label },
      h("details", {}, h("summary", {}, h("strong", {}, d.label), h("span", { class: "muted" }, ` ${fmt(d.content.length)} chars`)), h("pre", { class: "full" }, d.content)),
      h("span", { class: "actions" }, act("Delete", async () => { await api(`/v1/documents/${q(d.label)}`, { method: "DELETE" }); await loadDocuments(); }, onError, "danger")))));
    if (!page.documents.length) documents.append(h("li", { class: "muted" }, "None."));
  };

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
    panel("Reminders", "reminders", h("div", {}, reminderForm, h("label", { class: "muted" }, showDone, " show completed")), reminders),
    panel("Memories", "memories", memoryForm, memories),
    panel("Documents", "documents", documentForm, documents)));
  await Promise.all([loadReminders(), loadMemories(), loadDocuments()]);
}
