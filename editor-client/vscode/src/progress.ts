// The server's work-done progress as a cancellable notification.
//
// vscode-languageclient shows server-created progress in the status bar, where it cannot be
// cancelled. A profile is long and cancellable (the server stops the job and replaces the
// worker within 2 s), so this handler answers window/workDoneProgress/create itself and shows
// a notification with a Cancel button that sends window/workDoneProgress/cancel.

import * as vscode from 'vscode';
import {
  LanguageClient,
  ProgressToken,
  WorkDoneProgress,
  WorkDoneProgressBegin,
  WorkDoneProgressCancelNotification,
  WorkDoneProgressCreateParams,
  WorkDoneProgressCreateRequest,
  WorkDoneProgressReport,
} from 'vscode-languageclient/node';

export function showProgressAsNotifications(client: LanguageClient): vscode.Disposable {
  return client.onRequest(WorkDoneProgressCreateRequest.type, (params: WorkDoneProgressCreateParams) => {
    track(client, params.token);
  });
}

function track(client: LanguageClient, token: ProgressToken): void {
  let progress: vscode.Progress<{ message?: string; increment?: number }> | undefined;
  let finish: (() => void) | undefined;
  let reported = 0;
  let ended = false;
  const report = (value: WorkDoneProgressBegin | WorkDoneProgressReport) => {
    if (!progress) {
      return;
    }
    const percentage = typeof value.percentage === 'number' ? Math.max(0, Math.min(100, value.percentage)) : undefined;
    const increment = percentage === undefined ? undefined : Math.max(0, percentage - reported);
    reported += increment ?? 0;
    progress.report({ message: value.message, increment });
  };
  const listener = client.onProgress(WorkDoneProgress.type, token, (value) => {
    switch (value.kind) {
      case 'begin':
        void vscode.window.withProgress(
          {
            location: vscode.ProgressLocation.Notification,
            title: value.title,
            cancellable: value.cancellable ?? false,
          },
          (p, cancel) => {
            progress = p;
            cancel.onCancellationRequested(() => {
              void client.sendNotification(WorkDoneProgressCancelNotification.type, { token });
            });
            report(value);
            return new Promise<void>((resolve) => {
              finish = resolve;
              if (ended) {
                resolve();
              }
            });
          },
        );
        break;
      case 'report':
        report(value);
        break;
      case 'end':
        ended = true;
        listener.dispose();
        finish?.();
        break;
    }
  });
}
