// The console's one script (served by src/console/plugin.ts under a CSP that allows only this origin's
// scripts). Everything works without it: it adds live updates of the overview and a dialog in front of
// each action. It builds DOM nodes with textContent only, never HTML from data.
/* global document, window, EventSource */
'use strict';

(function () {
  var base = document.body.getAttribute('data-base') || '/console';

  function cell(text) {
    var td = document.createElement('td');
    td.textContent = text;
    return td;
  }

  function renderAttention(rows) {
    var body = document.querySelector('[data-live="attention"]');
    if (!body) return;
    var fresh = document.createDocumentFragment();
    rows.forEach(function (row) {
      var tr = document.createElement('tr');
      var first = document.createElement('td');
      var link = document.createElement('a');
      link.href = base + '/transfers/' + encodeURIComponent(row.sequenceId);
      link.textContent = row.sequenceId;
      first.appendChild(link);
      tr.appendChild(first);
      tr.appendChild(cell(row.reasonText));
      var since = document.createElement('td');
      var time = document.createElement('time');
      time.dateTime = row.since;
      time.textContent = row.since;
      since.appendChild(time);
      tr.appendChild(since);
      tr.appendChild(cell(row.age));
      fresh.appendChild(tr);
    });
    if (rows.length === 0) {
      var empty = document.createElement('tr');
      empty.className = 'empty';
      var td = cell('Nothing needs attention.');
      td.colSpan = 4;
      empty.appendChild(td);
      fresh.appendChild(empty);
    }
    body.replaceChildren(fresh);
    var count = document.querySelector('[data-live="attention-count"]');
    if (count) count.textContent = String(rows.length);
  }

  function renderCounts(counts) {
    Object.keys(counts.states).forEach(function (state) {
      var td = document.querySelector('[data-state="' + state + '"]');
      if (td) td.textContent = String(counts.states[state]);
    });
    Object.keys(counts.attention).forEach(function (reason) {
      var span = document.querySelector('[data-reason="' + reason + '"]');
      if (span) span.textContent = String(counts.attention[reason]);
    });
  }

  function live() {
    if (!document.querySelector('[data-live="attention"]') || !window.EventSource) return;
    var status = document.querySelector('[data-live="status"]');
    var source = new EventSource(base + '/events');
    source.addEventListener('summary', function (message) {
      var summary = JSON.parse(message.data);
      renderCounts(summary.counts);
      renderAttention(summary.attention);
      if (status) status.textContent = 'Updated live, last at ' + new Date().toLocaleTimeString() + '.';
    });
    source.addEventListener('error', function () {
      if (status) status.textContent = 'Live updates interrupted; reconnecting.';
    });
  }

  // An action's form: with this script, its reason and confirmation fields give way to a dialog that
  // names the exact sequenceId and asks for the reason; the form is then sent as typed by hand.
  function guard(form) {
    var sequenceId = form.getAttribute('data-confirm');
    var what = form.getAttribute('data-action');
    var reason = form.querySelector('[name="reason"]');
    var confirm = form.querySelector('[name="confirm"]');
    if (!sequenceId || !reason || !confirm) return;
    [reason, confirm].forEach(function (input) {
      input.required = false;
      input.hidden = true;
      var label = form.querySelector('label[for="' + input.id + '"]');
      if (label) label.hidden = true;
    });

    var dialog = document.createElement('dialog');
    dialog.setAttribute('aria-labelledby', form.id + '-dialog-title');
    var inner = document.createElement('form');
    inner.method = 'dialog';
    var title = document.createElement('h2');
    title.id = form.id + '-dialog-title';
    title.textContent = what + ': transfer ' + sequenceId;
    var label = document.createElement('label');
    label.textContent = 'Reason (recorded on the audit stream)';
    var text = document.createElement('textarea');
    text.name = 'dialog-reason';
    text.required = true;
    text.maxLength = 500;
    label.appendChild(text);
    var ok = document.createElement('button');
    ok.type = 'submit';
    ok.value = 'confirm';
    ok.textContent = 'Confirm ' + what + ' of ' + sequenceId;
    var back = document.createElement('button');
    back.type = 'button';
    back.textContent = 'Back';
    back.addEventListener('click', function () {
      dialog.close('back');
    });
    inner.append(title, label, ok, back);
    dialog.appendChild(inner);
    document.body.appendChild(dialog);

    form.addEventListener('submit', function (event) {
      event.preventDefault();
      text.value = '';
      dialog.showModal();
      text.focus();
    });
    dialog.addEventListener('close', function () {
      if (dialog.returnValue !== 'confirm') return;
      reason.value = text.value.trim();
      confirm.value = sequenceId;
      form.submit();
    });
  }

  document.addEventListener('DOMContentLoaded', function () {
    live();
    var forms = document.querySelectorAll('form[data-confirm]');
    for (var i = 0; i < forms.length; i++) {
      if (!forms[i].id) forms[i].id = 'action-' + i;
      guard(forms[i]);
    }
  });
})();
